"""``instrument`` on every kind of loader: the batches are the ones the loader gives uninstrumented,
what frameworks read from it is kept, its workers' records arrive, and training never breaks."""

from __future__ import annotations

import multiprocessing as mp
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from torch.utils.data import DataLoader

import perfkit
import perfkit.torch
from perfkit import Registry
from perfkit._warn import PerfkitWarning
from tests.torch.loaders import Squares, Stream, collate, decode, square
from tests.torch.test_loaders import write_shards

Instrument = Callable[[Any], Any]
Make = Callable[[Instrument, Path], Any]


def seeded(**kwargs: Any) -> DataLoader[Any]:
    """A shuffled loader with workers: the order depends on the seed only."""
    kwargs.setdefault("multiprocessing_context", "fork")
    return DataLoader(
        Squares(12),
        batch_size=3,
        shuffle=True,
        generator=torch.Generator().manual_seed(7),
        num_workers=2,
        collate_fn=collate,
        **kwargs,
    )


def stateful(inst: Instrument, _: Path) -> Any:
    from torchdata.stateful_dataloader import StatefulDataLoader

    generator = torch.Generator().manual_seed(7)
    loader = StatefulDataLoader(
        Squares(12), batch_size=3, shuffle=True, generator=generator, num_workers=2, collate_fn=collate
    )
    return inst(loader)


def accelerator(**config: Any) -> Any:
    accelerate = pytest.importorskip("accelerate", reason="accelerate is a test dependency")
    return accelerate.Accelerator(cpu=True, dataloader_config=accelerate.DataLoaderConfiguration(**config))


def streaming(inst: Instrument, tmp: Path) -> Any:
    litdata = pytest.importorskip("litdata", reason="litdata is a test dependency: pip install litdata boto3")
    from litdata.streaming.writer import BinaryWriter

    if not (tmp / "index.json").exists():
        writer = BinaryWriter(cache_dir=str(tmp), chunk_size=4)
        for i in range(12):
            writer[i] = {"x": Squares(12)[i]}
        writer.done()
        writer.merge()
    return inst(litdata.StreamingDataLoader(litdata.StreamingDataset(str(tmp)), batch_size=3, num_workers=2))


def webloader(inst: Instrument, tmp: Path) -> Any:
    wds = pytest.importorskip("webdataset", reason="webdataset is a test dependency")
    shards = write_shards(tmp, shards=2, per_shard=6) if not (tmp / "shard-0.tar").exists() else ""
    shards = shards or str(tmp / "shard-{0..1}.tar")
    dataset = wds.WebDataset(shards, shardshuffle=False, empty_check=False).map(decode).batched(3)
    return inst(wds.WebLoader(dataset, batch_size=None, num_workers=2).unbatched().batched(4))


def nodes(inst: Instrument, _: Path) -> Any:
    from torchdata.nodes import Batcher, IterableWrapper, Loader, ParallelMapper

    mapper = ParallelMapper(IterableWrapper(range(12)), map_fn=square, num_workers=2, method="process")  # type: ignore[arg-type]
    return inst(Loader(Batcher(mapper, batch_size=3)))


def generator(inst: Instrument, _: Path) -> Any:
    def batches() -> Iterator[torch.Tensor]:
        for i in range(0, 12, 3):
            yield collate([Squares(12)[j] for j in range(i, i + 3)])

    return inst(batches())


# kind -> (how to make it, given how to instrument it; NAME.data.fetch records expected per epoch)
KINDS: dict[str, tuple[Make, int | None]] = {
    "DataLoader": (lambda inst, _: inst(seeded()), 4),
    "DataLoader/spawn": (lambda inst, _: inst(seeded(multiprocessing_context="spawn")), 4),
    "DataLoader/IterableDataset": (
        lambda inst, _: inst(DataLoader(Stream(12), batch_size=3, num_workers=2, collate_fn=collate)),
        4,
    ),
    "StatefulDataLoader": (stateful, 4),
    "DataLoaderShard/instrumented-after-prepare": (lambda inst, _: inst(accelerator().prepare(seeded())), 4),
    "DataLoaderShard/instrumented-before-prepare": (lambda inst, _: accelerator().prepare(inst(seeded())), 4),
    "DataLoaderDispatcher": (lambda inst, _: inst(accelerator(dispatch_batches=True).prepare(seeded())), 4),
    "StreamingDataLoader": (streaming, 4),
    "WebLoader": (webloader, 4),
    "torchdata.nodes": (nodes, 12),  # one per item mapped
    "generator": (generator, None),
}
NEEDS = {"StatefulDataLoader": "torchdata", "torchdata.nodes": "torchdata"}


def plain(batch: Any) -> Any:
    """A batch as Python values, to compare; a Shipment (or any stranger) is kept as it is."""
    if isinstance(batch, torch.Tensor):
        return batch.tolist()
    if isinstance(batch, dict):
        return {k: plain(v) for k, v in batch.items()}
    if isinstance(batch, (list, tuple)):
        return [plain(v) for v in batch]
    return batch


def epochs(loader: Any, n: int = 2) -> list[list[Any]]:
    out = []
    for epoch in range(n):
        if hasattr(loader, "set_epoch"):
            loader.set_epoch(epoch)
        out.append([plain(batch) for batch in loader])
    return out


@pytest.mark.parametrize("time_wait", [False, True], ids=["", "time_wait"])
@pytest.mark.parametrize("kind", list(KINDS))
def test_instrumented_gives_the_same_batches_and_brings_the_workers_records(
    kind: str, time_wait: bool, tmp_path: Path
) -> None:
    if kind in NEEDS:
        pytest.importorskip(NEEDS[kind], reason=f"{NEEDS[kind]} is an optional extra")
    if kind == "DataLoader/spawn" and "spawn" not in mp.get_all_start_methods():
        pytest.skip("no spawn here")
    make, fetches = KINDS[kind]
    expected = epochs(make(lambda loader: loader, tmp_path))
    reg = Registry()
    instrumented = make(
        lambda x: perfkit.torch.instrument(x, "train", registry=reg, time_wait=time_wait), tmp_path
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error", PerfkitWarning)  # nothing here is left uninstrumented
        assert epochs(instrumented) == expected
    snap = reg.snapshot()
    if fetches is not None:
        assert snap["train.data.fetch"].count == 2 * fetches
        assert None not in snap.by_worker("train.data.fetch")  # made in the workers, brought here
    if time_wait:
        assert snap["train.data.wait"].count == sum(len(e) for e in expected)  # a generator: one epoch


@pytest.mark.parametrize(
    "kind",
    [
        "DataLoader",
        "DataLoader/IterableDataset",
        "StatefulDataLoader",
        "DataLoaderShard/instrumented-after-prepare",
        "DataLoaderDispatcher",
        "StreamingDataLoader",
    ],
)
def test_the_loader_is_the_same_object_with_what_frameworks_read(kind: str, tmp_path: Path) -> None:
    if kind in NEEDS:
        pytest.importorskip(NEEDS[kind], reason=f"{NEEDS[kind]} is an optional extra")
    make, _ = KINDS[kind]
    original = make(lambda loader: loader, tmp_path)
    before = {attr: getattr(original, attr) for attr in ("dataset", "batch_size", "sampler", "batch_sampler")}
    length = length_of(original)
    result = perfkit.torch.instrument(original, "train", time_wait=True)
    assert result is original
    assert type(result) is type(original)
    assert isinstance(result, type(original))
    assert isinstance(result, DataLoader)  # accelerate's loaders say so through __class__
    assert {attr: getattr(result, attr) for attr in before} == before
    assert length_of(result) == length


def length_of(loader: Any) -> int | str:
    try:
        return len(loader)
    except TypeError as exc:  # an IterableDataset without __len__: the same error either way
        return str(exc)


def test_a_stateful_dataloader_resumes_to_the_same_batches() -> None:
    pytest.importorskip("torchdata", reason="torchdata is an optional extra")

    def resumed(inst: Instrument) -> list[Any]:
        loader = stateful(inst, Path())
        it = iter(loader)
        next(it), next(it)
        state = loader.state_dict()
        again = stateful(inst, Path())
        again.load_state_dict(state)
        return [plain(b) for b in again]

    reg = Registry()
    batches = resumed(lambda loader: perfkit.torch.instrument(loader, "train", registry=reg))
    assert batches == resumed(lambda loader: loader)
    assert len(batches) == 2
    assert reg.snapshot()["train.data.fetch"].count == 2 + 2  # two before the save, two after the resume


def test_a_dataloader_recreated_by_lightning_keeps_its_settings() -> None:
    """Lightning re-creates a loader from its attributes (a DistributedSampler, predict's indices):
    the copy iterates the same batches, its waits and its workers' records are still the loader's."""
    from lightning.pytorch.utilities.data import _update_dataloader
    from torch.utils.data import SequentialSampler

    reg = Registry()
    original = perfkit.torch.instrument(seeded(), "val", registry=reg, time_wait=True)
    recreated = _update_dataloader(original, SequentialSampler(original.dataset))
    assert type(recreated) is DataLoader
    in_order = [[[float(i * i)] * 4 for i in range(j, j + 3)] for j in range(0, 12, 3)]
    assert [plain(b) for b in recreated] == in_order
    snap = reg.snapshot()
    assert {name: snap[name].count for name in ("val.data.wait", "val.data.iter", "val.data.fetch")} == {
        "val.data.wait": 4,
        "val.data.iter": 1,
        "val.data.fetch": 4,
    }


class ReadOnlyLoader(DataLoader):  # type: ignore[type-arg]
    """A loader that refuses every attribute assignment after it is made."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.__dict__["frozen"] = True

    def __setattr__(self, attr: str, value: Any) -> None:
        if self.__dict__.get("frozen"):
            raise AttributeError(f"{attr} is read-only")
        super().__setattr__(attr, value)


@pytest.mark.parametrize("time_wait", [False, True])
def test_a_loader_that_refuses_is_left_as_it_is_with_one_warning(time_wait: bool) -> None:
    from perfkit.torch._dataloader import warn

    warn.counts.pop("loader:ReadOnlyLoader", None)

    def make() -> ReadOnlyLoader:
        return ReadOnlyLoader(Squares(6), batch_size=3, num_workers=1, collate_fn=collate)

    expected = [plain(b) for b in make()]
    reg = Registry()
    loader = make()
    said = r"the train loader, a ReadOnlyLoader, is left as it is .*read-only.* records made in its workers"
    with pytest.warns(PerfkitWarning, match=said) as seen:
        result = perfkit.torch.instrument(loader, "train", registry=reg, time_wait=time_wait)
        perfkit.torch.instrument(make(), "train", registry=reg, time_wait=time_wait)  # said once
    assert len([w for w in seen if issubclass(w.category, PerfkitWarning)]) == 1
    assert loader.collate_fn is collate  # untouched
    if time_wait:
        assert [plain(b) for b in result] == expected
        assert reg.snapshot()["train.data.wait"].count == 2  # still timed
    else:
        assert result is loader
        assert [plain(b) for b in result] == expected
        assert "train.data.fetch" not in reg.snapshot()


def test_an_uninstrumented_loader_meets_no_perfkit_on_its_way() -> None:
    """Once one loader is instrumented, torch's iterators hand Shipments over for every loader,
    and leave any other batch untouched (a loader perfkit never saw gives exactly its batches)."""
    perfkit.torch.instrument(DataLoader([0]), "x")
    loader = DataLoader(Squares(6), batch_size=3, num_workers=1, collate_fn=collate)
    assert [plain(b) for b in loader] == [[[float(i * i)] * 4 for i in range(j, j + 3)] for j in (0, 3)]


class PosesAsDataLoader:
    """Says it is a DataLoader (as accelerate's adapters do) but holds none perfkit can find."""

    @property
    def __class__(self) -> type[Any]:  # type: ignore[override]
        return DataLoader

    def __iter__(self) -> Iterator[int]:
        return iter(range(3))


def test_an_object_posing_as_a_dataloader_that_holds_none_is_timed_with_one_warning() -> None:
    from perfkit.torch._dataloader import warn

    warn.counts.pop("loader:PosesAsDataLoader", None)
    loader = PosesAsDataLoader()
    reg = Registry()
    with pytest.warns(PerfkitWarning, match="holds no DataLoader perfkit can find"):
        result = perfkit.torch.instrument(loader, "train", registry=reg, time_wait=True)
    assert list(result) == [0, 1, 2]
    assert reg.snapshot()["train.data.wait"].count == 3
