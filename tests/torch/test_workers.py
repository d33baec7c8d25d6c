"""Records made in real DataLoader worker processes reach the main process, in time for their window."""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from torch.utils.data import DataLoader

import perfkit
import perfkit.torch
from perfkit import Registry
from perfkit.torch._workers import Shipment, collect_records, deliver, queued_ns
from tests.torch.loaders import ReportsInit, Squares, Stream, collate, mark_init

METHODS = [m for m in ("fork", "spawn", "forkserver") if m in mp.get_all_start_methods()]
QUEUED = {"train.data.fetch_queued": 4} if queued_ns() is not None else {}


def run_epochs(loader: DataLoader[Any], reg: Registry, epochs: int = 2) -> list[perfkit.Snapshot]:
    windows = []
    with perfkit.use_registry(reg):
        for _ in range(epochs):
            start = reg.cursor()
            for _batch in perfkit.timed_iter(loader, "train"):
                pass
            windows.append(reg.snapshot(since=start))  # right after the last batch
    return windows


def counts(snap: perfkit.Snapshot) -> dict[str, int]:
    return {name: snap[name].count for name in snap}


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("persistent", [False, True])
@pytest.mark.parametrize("workers", [1, 2, 4])
def test_every_record_of_every_epoch_arrives_with_its_epoch(
    method: str, persistent: bool, workers: int
) -> None:
    reg = Registry()
    loader = DataLoader(
        Squares(12),
        batch_size=3,
        num_workers=workers,
        collate_fn=collate,
        multiprocessing_context=method,
        persistent_workers=persistent,
    )
    perfkit.torch.instrument(loader, "train")
    for epoch, window in enumerate(run_epochs(loader, reg)):
        # persistent workers resumed by a later epoch's iter() each answer once: received here too
        resumed = workers if persistent and epoch > 0 else 0
        assert counts(window) == {
            "train.loop.turn": 4,
            "train.data.iter": 1,
            "train.data.wait": 4,
            "train.data.end": 1,  # the last next(), which shut non-persistent workers down
            # every draw of the sampler in this process: iter() primes prefetch_factor (2) batches a
            # worker, each batch received asks for one more; the draws past the 4th find it empty
            "train.data.sampler": 2 * workers + 4,
            "train.data.receive": 4 + resumed,  # a worker's batch rebuilt here
            "train.data.handle": 4,  # each batch one tensor: one shared-memory handle opened
            "train.data.fetch": 4,
            "train.data.fetch_cpu": 4,
            **QUEUED,  # each batch's time queued for a core in its worker, where the kernel says
            "getitem": 12,
            "transform": 12,
            "collate": 4,
        }
        by_worker = window.by_worker("getitem")
        assert set(by_worker) == set(range(min(workers, 4)))
        assert sum(s.count for s in by_worker.values()) == 12
        assert window.tree[("train.data.fetch", "getitem", "transform")].count == 12
        assert window.dropped_in_transfer == 0


def test_without_workers_records_are_made_here() -> None:
    reg = Registry()
    loader = perfkit.torch.instrument(DataLoader(Squares(6), batch_size=3, collate_fn=collate), "train")
    (window,) = run_epochs(loader, reg, epochs=1)
    assert counts(window) == {
        "train.loop.turn": 2,
        "train.data.iter": 1,
        "train.data.wait": 2,
        "train.data.end": 1,
        "train.data.sampler": 3,  # its last call said the epoch was done
        "train.data.make": 2,
        "getitem": 6,
        "transform": 6,
        "collate": 2,
    }
    assert set(window.by_worker("getitem")) == {None}
    assert ("train.data.wait", "getitem") in window.tree  # fetched inside next(): nested under the wait


def test_spawned_workers_need_no_fork_inheritance() -> None:
    """Under spawn nothing is inherited: the records prove the hook was pickled and ran there."""
    reg = Registry()
    loader = DataLoader(
        Squares(8), batch_size=2, num_workers=2, collate_fn=collate, multiprocessing_context="spawn"
    )
    (window,) = run_epochs(perfkit.torch.instrument(loader, "train"), reg, epochs=1)
    pids = {window.threads[i].pid for i in window.data("getitem").threads.tolist()}
    assert os.getpid() not in pids
    assert len(pids) == 2
    assert {window.threads[i].worker for i in window.data("getitem").threads.tolist()} == {0, 1}


def test_train_and_validation_loaders_at_once_keep_their_own_names() -> None:
    reg = Registry()
    train = perfkit.torch.instrument(
        DataLoader(Squares(8), batch_size=2, num_workers=2, collate_fn=collate), "train"
    )
    val = perfkit.torch.instrument(
        DataLoader(Squares(4), batch_size=2, num_workers=2, collate_fn=collate), "val"
    )
    with perfkit.use_registry(reg):
        start = reg.cursor()
        for _ in perfkit.timed_iter(train, "train"):
            pass
        for _ in perfkit.timed_iter(val, "val"):
            pass
        snap = reg.snapshot(since=start)
    assert (snap["train.data.fetch"].count, snap["val.data.fetch"].count) == (4, 2)
    assert snap.tree[("train.data.fetch", "getitem")].count == 8
    assert snap.tree[("val.data.fetch", "getitem")].count == 4


def test_pin_memory_and_prefetching() -> None:
    reg = Registry()
    loader = DataLoader(
        Squares(12), batch_size=2, num_workers=2, collate_fn=collate, pin_memory=True, prefetch_factor=4
    )
    with pytest.warns(UserWarning, match="pin_memory"):  # no accelerator here: torch says so and goes on
        (window,) = run_epochs(perfkit.torch.instrument(loader, "train"), reg, epochs=1)
    assert window["getitem"].count == 12


def test_the_pin_memory_thread_keeps_the_records_with_the_batch() -> None:
    from torch.utils.data._utils.pin_memory import pin_memory

    shipment = Shipment({"ids": [1, 2]}, [])
    pinned = pin_memory(shipment)
    assert isinstance(pinned, Shipment)
    assert (pinned.data, pinned.records) == ({"ids": [1, 2]}, [])


def test_iterable_datasets_are_covered() -> None:
    reg = Registry()
    loader = DataLoader(Stream(12), batch_size=3, num_workers=2, collate_fn=collate)
    (window,) = run_epochs(perfkit.torch.instrument(loader, "train"), reg, epochs=1)
    assert window["produce"].count == 12
    assert window["collate"].count == 4


def test_a_worker_that_raises_surfaces_its_error_and_earlier_batches_are_kept() -> None:
    reg = Registry()
    loader = DataLoader(Squares(12, fail_at=9), batch_size=3, num_workers=1, collate_fn=collate)
    perfkit.torch.instrument(loader, "train")
    with perfkit.use_registry(reg), pytest.raises(ValueError, match="corrupt sample 9"):
        for _ in perfkit.timed_iter(loader, "train"):
            pass
    snap = reg.snapshot()
    assert snap["collate"].count == 3  # the three batches handed over before the failing one
    assert snap["train.data.wait"].errors == 1


SCRIPT_FUNCTIONS = """
import json, perfkit, perfkit.torch, torch
from torch.utils.data import DataLoader, Dataset


@perfkit.timed
def double(x):
    return 2 * x


class Doubles(Dataset):
    def __len__(self):
        return 4

    def __getitem__(self, i):
        return double(i)


if __name__ == "__main__":
    loader = DataLoader(Doubles(), batch_size=2, num_workers=1, multiprocessing_context="spawn")
    for _ in perfkit.timed_iter(perfkit.torch.instrument(loader, "train"), "train"):
        pass
    double(1)
    snap = perfkit.snapshot()
    print(json.dumps({n: snap[n].count for n in snap if n.endswith("double")}))
"""


def test_a_scripts_function_has_one_name_in_the_script_and_in_spawned_workers(tmp_path: Path) -> None:
    """multiprocessing imports a script as ``__mp_main__`` in spawned workers: its @timed functions
    are still ``__main__.f`` there, so the workers' calls and the script's meet in one series."""
    script = tmp_path / "train.py"
    script.write_text(SCRIPT_FUNCTIONS)
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=300, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {"__main__.double": 5}


KILLED_WORKER_SCRIPT = """
import json, perfkit, perfkit.torch
from torch.utils.data import DataLoader
from tests.torch.loaders import Squares, collate

loader = perfkit.torch.instrument(
    DataLoader(Squares(12, kill_at=7), batch_size=1, num_workers=1, collate_fn=collate, timeout=60), "train"
)
error = None
try:
    for _ in perfkit.timed_iter(loader, "train"):
        pass
except Exception as exc:  # how the death surfaces depends on what the worker was doing
    error = f"{type(exc).__name__}: {exc}"
snap = perfkit.snapshot()
print(json.dumps({"error": error, "getitem": snap["getitem"].count if "getitem" in snap else 0}))
"""


def test_a_worker_killed_by_a_signal_does_not_hang_the_main_process() -> None:
    # A separate process: torch reports a dead worker from a SIGCHLD handler, which may raise
    # at any later point of the main thread, and would do so inside pytest itself.
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-c", KILLED_WORKER_SCRIPT], cwd=root, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    # torch says so itself, or fails to receive the batch the worker was handing over when it died
    # (its shared-memory handle or the rest of its pickle never arrive)
    assert "DataLoader worker" in result["error"] or result["error"].startswith(
        ("ConnectionResetError", "ConnectionRefusedError", "FileNotFoundError", "EOFError", "UnpicklingError")
    ), result["error"]
    # The main process may notice the dead worker before reading the batches it had queued:
    # what arrives is at most the work handed over before the kill.
    assert result["getitem"] <= 7


def test_records_made_before_the_fork_are_not_counted_twice() -> None:
    reg = Registry()
    with perfkit.use_registry(reg):
        for i in range(5):
            Squares()[i]  # five records in the parent, before any worker exists
    loader = DataLoader(
        Squares(4), batch_size=2, num_workers=2, collate_fn=collate, multiprocessing_context="fork"
    )
    run_epochs(perfkit.torch.instrument(loader, "train"), reg, epochs=1)
    assert reg.snapshot()["getitem"].count == 5 + 4


def test_the_users_worker_init_fn_still_runs() -> None:
    loader = DataLoader(ReportsInit(), batch_size=2, num_workers=2, worker_init_fn=mark_init)
    perfkit.torch.instrument(loader, "train")
    values = sorted(int(v) for batch in loader for v in batch)
    assert values == [100, 100, 101, 101]


def test_instrumenting_twice_wraps_once() -> None:
    loader = DataLoader(ReportsInit(), batch_size=2, num_workers=1, worker_init_fn=mark_init)
    perfkit.torch.instrument(perfkit.torch.instrument(loader, "a"), "b")
    assert loader.worker_init_fn.user_init is mark_init  # type: ignore[union-attr]
    assert loader.worker_init_fn.name == "b"  # type: ignore[union-attr]
    assert isinstance(loader, DataLoader)


def test_a_full_transport_drops_the_newest_and_counts_them(clock: Any) -> None:
    worker = Registry(clock=clock)
    worker.forward(max_records=5)
    for i in range(8):
        worker.record("item", i, i + 10)
    main = Registry(clock=clock)
    batch = worker.take_records()
    assert batch is not None
    main.receive(batch)
    snap = main.snapshot()
    assert snap["item"].count == 5
    assert snap.data("item").starts_ns.tolist() == [0, 1, 2, 3, 4]  # the oldest kept
    assert snap.dropped_in_transfer == 3
    assert worker.take_records() is None


def test_delivery_sends_each_registry_its_own_records(clock: Any) -> None:
    sender = Registry(clock=clock)  # stands for a worker's copy of two registries
    sender.forward()
    sender.record("for_target", 0, 5)
    for_target = sender.take_records()
    sender.record("for_default", 0, 7)
    for_default = sender.take_records()
    assert for_target is not None
    assert for_default is not None
    target, default = Registry(clock=clock), Registry(clock=clock)
    shipment = Shipment("batch", [(target.key, for_target), (None, for_default)])
    assert deliver(shipment, default) == "batch"
    assert list(target.snapshot()) == ["for_target"]
    assert list(default.snapshot()) == ["for_default"]


def test_collect_records_takes_each_forwarding_registry_once(clock: Any) -> None:
    reg = Registry(clock=clock)
    reg.forward()
    reg.record("x", 0, 1)
    taken = [batch for key, batch in collect_records() if key == reg.key]
    assert [len(b) for b in taken] == [1]
    assert not [batch for key, batch in collect_records() if key == reg.key]


@pytest.mark.parametrize("bad", [None, 3.5, object()])
def test_instrument_needs_a_loader(bad: object) -> None:
    with pytest.raises(TypeError, match="loader must be a torch DataLoader .*, or any iterable; got"):
        perfkit.torch.instrument(bad)


def test_instrument_checks_name_and_registry() -> None:
    loader = DataLoader([torch.zeros(1)])
    with pytest.raises(ValueError, match="name must be a non-empty str"):
        perfkit.torch.instrument(loader, "")
    with pytest.raises(TypeError, match="registry must be a perfkit.Registry"):
        perfkit.torch.instrument(loader, "x", registry="reg")  # type: ignore[arg-type]


def test_time_wait_records_each_batch_wait_without_timed_iter() -> None:
    reg = Registry()
    loader = DataLoader(Squares(6), batch_size=2, collate_fn=collate)
    perfkit.torch.instrument(loader, "val", time_wait=True)
    with perfkit.use_registry(reg):
        assert len(list(loader)) == 3
    snap = reg.snapshot()
    assert snap["val.data.wait"].count == 3  # the call that finds the end is not a wait for a batch
    assert snap.tree[("val.data.wait", "getitem", "transform")].count == 6


def test_a_loader_recreated_from_its_arguments_stays_instrumented() -> None:
    """Lightning re-creates loaders to add a DistributedSampler: instrumentation must survive it."""
    from lightning.pytorch.utilities.data import _update_dataloader
    from torch.utils.data import SequentialSampler

    reg = Registry()
    original = DataLoader(
        Squares(6), batch_size=2, num_workers=1, collate_fn=collate, worker_init_fn=mark_init
    )
    perfkit.torch.instrument(original, "train", registry=reg, time_wait=True)
    recreated = _update_dataloader(original, SequentialSampler(original.dataset))  # type: ignore[arg-type]
    assert recreated is not original
    assert recreated.worker_init_fn.user_init is mark_init  # type: ignore[union-attr]
    assert len(list(recreated)) == 3
    snap = reg.snapshot()
    assert (snap["train.data.wait"].count, snap["train.data.fetch"].count, snap["getitem"].count) == (3, 3, 6)
