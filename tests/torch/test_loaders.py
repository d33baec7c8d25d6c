"""Loaders beyond torch's DataLoader: torchdata's StatefulDataLoader and nodes pipelines, a DataLoader
subclass with its own workers, plain iterables, and what is not a loader."""

from __future__ import annotations

import io
import multiprocessing as mp
import tarfile
from pathlib import Path
from typing import Any

import pytest
import torch
from torch.utils.data import DataLoader

import perfkit
import perfkit.torch
from perfkit import Registry
from tests.torch.loaders import OwnWorkers, Squares, collate, decode, square

torchdata = pytest.importorskip(
    "torchdata", reason="torchdata is an optional extra: pip install 'perfkit[torchdata]'"
)
METHODS = [m for m in ("fork", "spawn") if m in mp.get_all_start_methods()]


def counts(snap: perfkit.Snapshot, *names: str) -> dict[str, int]:
    return {n: snap[n].count for n in names if n in snap}


def epoch(loader: Any, reg: Registry, stop_after: int | None = None) -> perfkit.Snapshot:
    start = reg.cursor()
    with perfkit.use_registry(reg):
        for i, _ in enumerate(perfkit.timed_iter(loader, "train")):
            if stop_after is not None and i + 1 == stop_after:
                break
    return reg.snapshot(since=start)


@pytest.mark.parametrize("method", METHODS)
def test_stateful_dataloader_every_epoch_and_after_a_resume(method: str) -> None:
    from torchdata.stateful_dataloader import StatefulDataLoader

    def make() -> StatefulDataLoader:  # type: ignore[type-arg]
        loader = StatefulDataLoader(
            Squares(12), batch_size=3, num_workers=2, collate_fn=collate, multiprocessing_context=method
        )
        return perfkit.torch.instrument(loader, "train")  # type: ignore[no-any-return]

    reg = Registry()
    loader = make()
    for _ in range(2):
        snap = epoch(loader, reg)
        assert counts(snap, "train.data.fetch", "getitem", "transform", "collate") == {
            "train.data.fetch": 4,
            "getitem": 12,
            "transform": 12,
            "collate": 4,
        }
        assert set(snap.by_worker("getitem")) == {0, 1}
    # stop after 2 of 4 batches, save, and resume in a new loader: the other 2 arrive, with their records
    it = iter(loader)
    next(it), next(it)
    state = loader.state_dict()
    resumed = make()
    resumed.load_state_dict(state)
    snap = epoch(resumed, reg)
    assert counts(snap, "train.data.fetch", "getitem", "collate") == {
        "train.data.fetch": 2,
        "getitem": 6,
        "collate": 2,
    }


@pytest.mark.parametrize("method", ["process", "thread"])
def test_a_torchdata_nodes_pipeline_brings_its_workers_records(method: str) -> None:
    from torchdata.nodes import Batcher, IterableWrapper, Loader, ParallelMapper

    node = ParallelMapper(
        IterableWrapper(range(12)),
        map_fn=square,
        num_workers=2,
        method=method,
        multiprocessing_context="fork",
    )  # type: ignore[arg-type]
    loader = perfkit.torch.instrument(Loader(Batcher(node, batch_size=3)), "train")
    reg = Registry()
    for _ in range(2):
        snap = epoch(loader, reg)
        assert counts(snap, "train.data.fetch", "getitem", "transform", "train.data.wait") == {
            "train.data.fetch": 12,  # one per item mapped
            "getitem": 12,
            "transform": 12,
            "train.data.wait": 4,
        }
        workers = {w for w in snap.by_worker("getitem") if w is not None}
        assert len(workers) == 2, snap.by_worker("getitem")
        assert snap.tree[("train.data.fetch", "getitem", "transform")].count == 12


def test_a_dataloader_subclass_with_its_own_workers_gives_its_batches_and_its_waits() -> None:
    """Its pool's results reach the main process through code perfkit cannot see (the subclass's
    own ``__iter__``), so nothing is shipped with them: the batches are the loader's, the waits
    are timed, and what its workers record stays there (docs/loaders.md says so)."""
    reg = Registry()
    expected = [b.tolist() for b in OwnWorkers(Squares(12), batch_size=3, collate_fn=collate)]
    loader = OwnWorkers(Squares(12), batch_size=3, collate_fn=collate)
    assert perfkit.torch.instrument(loader, "train", registry=reg, time_wait=True) is loader
    assert [b.tolist() for b in loader] == expected
    snap = reg.snapshot()
    assert counts(snap, "getitem", "train.data.wait", "train.data.iter") == {
        "train.data.wait": 4,
        "train.data.iter": 1,
    }


def write_shards(folder: Path, shards: int, per_shard: int) -> str:
    """WebDataset shards: tar files of samples ``NNNNNN.x.txt``; returns the brace pattern."""
    for s in range(shards):
        with tarfile.open(folder / f"shard-{s}.tar", "w") as tar:
            for i in range(per_shard):
                data = str(s * per_shard + i).encode()
                info = tarfile.TarInfo(f"{s:03d}{i:03d}.x.txt")
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return str(folder / f"shard-{{0..{shards - 1}}}.tar")


@pytest.mark.parametrize("method", METHODS)
def test_a_webdataset_webloader_brings_its_workers_records(method: str, tmp_path: Path) -> None:
    """WebLoader is not a DataLoader: a pipeline whose first stage is one. Its workers' records
    arrive every epoch, and stages after the DataLoader (here a re-batching) run in the loop's wait."""
    wds = pytest.importorskip("webdataset", reason="webdataset is a test dependency: pip install webdataset")
    shards = write_shards(tmp_path, shards=2, per_shard=6)
    dataset = wds.WebDataset(shards, shardshuffle=False, empty_check=False).map(decode).batched(3)
    loader = wds.WebLoader(dataset, batch_size=None, num_workers=2, multiprocessing_context=method)
    loader = perfkit.torch.instrument(loader.unbatched().batched(4), "train")
    reg = Registry()
    for _ in range(2):
        start = reg.cursor()
        with perfkit.use_registry(reg):
            seen = sorted(float(x) for batch in perfkit.timed_iter(loader, "train") for x in batch[0])
        snap = reg.snapshot(since=start)
        assert seen == [float(i) for i in range(12)]
        assert counts(snap, "decode", "train.data.fetch", "train.data.wait") == {
            "decode": 12,  # one per sample, made in the workers
            "train.data.fetch": 4,  # one per worker batch of 3
            "train.data.wait": 3,  # one per batch of 4 the loop takes
        }
        assert set(snap.by_worker("decode")) == {0, 1}


def test_a_plain_iterable_gets_its_data_wait_only() -> None:
    reg = Registry()
    loader = perfkit.torch.instrument([torch.zeros(2)] * 5, "val", registry=reg, time_wait=True)
    assert len(loader) == 5
    assert len(list(loader)) == 5
    snap = reg.snapshot()
    assert counts(snap, "val.data.wait", "val.data.iter") == {"val.data.wait": 5, "val.data.iter": 1}


def test_a_plain_iterable_under_timed_iter_has_each_wait_once() -> None:
    """Without time_wait the loop's own timer is the only one (as for a DataLoader)."""
    source = [torch.zeros(2)] * 5
    assert perfkit.torch.instrument(source, "val") is source
    reg = Registry()
    with perfkit.use_registry(reg):
        for _ in perfkit.timed_iter(perfkit.torch.instrument(source, "val"), "val"):
            pass
    assert counts(reg.snapshot(), "val.data.wait", "val.data.iter") == {
        "val.data.wait": 5,
        "val.data.iter": 1,
    }


@pytest.mark.parametrize("kind", ["DataLoader", "list"])
def test_a_loader_timed_twice_has_each_wait_and_start_once(kind: str) -> None:
    """instrument(time_wait=True) under timed_iter (or perfkit.window): the inner timer sees the
    outer one open for the same series and leaves the record to it."""
    source: Any = DataLoader(Squares(8), batch_size=2) if kind == "DataLoader" else [torch.zeros(2)] * 4
    loader = perfkit.torch.instrument(source, "train", time_wait=True)
    reg = Registry()
    with perfkit.use_registry(reg):
        for _ in perfkit.timed_iter(loader, "train"):
            pass
    snap = reg.snapshot()
    assert counts(snap, "train.data.wait", "train.data.iter") == {"train.data.wait": 4, "train.data.iter": 1}
    assert not [path for path in snap.tree if path.count("train.data.wait") > 1]


def test_what_is_not_a_loader_is_refused_naming_what_is_supported() -> None:
    with pytest.raises(
        TypeError, match=r"loader must be a torch DataLoader .* or any iterable; got 42 of type int"
    ):
        perfkit.torch.instrument(42, "train")
