"""What the device timers cost per call on CPU: the sync watch's wrappers and hook, a copy's timing.

    python benchmarks/bench_device.py            # about 20 s

Rows, each the median over interleaved rounds, ns per call:

* ``item()`` of a CPU tensor, bare, then wrapped by a ``SyncWatch`` (what every call of a wrapped
  entry point pays when it does not synchronize: two clock reads and a thread-local lookup);
* a call that synchronizes, as the watch sees it on CUDA: torch's warning ("called a
  synchronizing CUDA operation") through Python's warnings machinery to the watch's hook, and one
  record (timed: ``sync.stall.SITE``; not timed: ``sync.untimed.SITE``). Here the warning is raised
  from Python (no GPU); on CUDA torch raises it from C++ when the binding returns, and the wait
  itself is the GPU's, typically far longer than this;
* ``time_copy`` around nothing, for a batch of 4 CPU tensors (host clock, record, two gauges, the
  batch's bytes walked; no CUDA events here: on CUDA add two event records, about 9 µs each on an
  H200).

The watch is started through its seam with a CUDA namespace that says "available" and keeps the
debug mode in a dict, so the real ``torch.Tensor`` methods are the ones wrapped.
"""

from __future__ import annotations

import gc
import statistics
import time
import warnings
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import torch

import perfkit
import perfkit.torch
from perfkit.torch import SyncWatch

SYNC_MESSAGE = "called a synchronizing CUDA operation"  # how torch's sync debug mode warns

ROUNDS, CALLS = 15, 2000


class Synchronizing:
    """A stand-in for a binding that synchronized: it warns as torch does in the debug mode."""

    def sync(self) -> int:
        warnings.warn(SYNC_MESSAGE, UserWarning, stacklevel=2)
        return 1

    def unwrapped_sync(self) -> int:
        warnings.warn(SYNC_MESSAGE, UserWarning, stacklevel=2)
        return 1


def per_call_ns(fn: Callable[[], Any]) -> float:
    t0 = time.perf_counter_ns()
    for _ in range(CALLS):
        fn()
    return (time.perf_counter_ns() - t0) / CALLS


def measure(rows: dict[str, Callable[[], Any]]) -> dict[str, float]:
    samples: dict[str, list[float]] = {k: [] for k in rows}
    for _ in range(ROUNDS):
        for name, fn in rows.items():
            gc.disable()
            try:
                samples[name].append(per_call_ns(fn))
            finally:
                gc.enable()
    return {k: statistics.median(v) for k, v in samples.items()}


def copy_once(batch: Any, reg: perfkit.Registry) -> None:
    with perfkit.torch.time_copy(batch, registry=reg):
        pass


def seam() -> Any:
    mode = {"value": 0}
    cuda = SimpleNamespace(
        is_available=lambda: True,
        get_sync_debug_mode=lambda: mode["value"],
        set_sync_debug_mode=lambda v: mode.update(value=v),
        synchronize=torch.cuda.synchronize,
    )
    return SimpleNamespace(Tensor=torch.Tensor, nonzero=torch.nonzero, cuda=cuda, __file__=torch.__file__)


def main() -> None:
    reg = perfkit.Registry(capacity=100)
    t = torch.ones(1)
    bare_item = torch.Tensor.item
    s = Synchronizing()
    batch = {
        "x": torch.zeros(64, 64),
        "y": torch.zeros(64),
        "ids": torch.zeros(64, dtype=torch.int64),
        "w": [t],
    }
    bare = measure({"item() of a CPU tensor, bare": lambda: bare_item(t)})

    watch = SyncWatch(reg, torch=seam())
    assert watch.start(), watch.reason
    watch._wrap(Synchronizing, "sync", explicit=False)  # a wrapped entry point that synchronizes
    try:
        watched = measure(
            {
                "item() of a CPU tensor, wrapped (no sync)": lambda: t.item(),
                "a sync, timed (warning + hook + record)": s.sync,
                "a sync, not timed (warning + hook + record)": s.unwrapped_sync,
            }
        )
    finally:
        watch.stop()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ignored = measure({"the same warning, ignored (no watch)": s.unwrapped_sync})
    copies = measure(
        {
            "with time_copy(batch): pass": lambda: copy_once(batch, reg),
            "pass (reference)": lambda: None,
        }
    )
    rows = {**bare, **watched, **ignored, **copies}
    width = max(map(len, rows))
    print(
        f"torch {torch.__version__}, perfkit hot path {perfkit.hot_path()}, {CALLS} calls x {ROUNDS} rounds"
    )
    for name, ns in rows.items():
        print(f"  {name:<{width}}  {ns / 1000:8.2f} µs")
    derived = {
        "wrapper overhead (wrapped - bare item)": rows["item() of a CPU tensor, wrapped (no sync)"]
        - rows["item() of a CPU tensor, bare"],
        "time_copy overhead": rows["with time_copy(batch): pass"] - rows["pass (reference)"],
    }
    for name, ns in derived.items():
        print(f"  {name:<{width}}  {ns / 1000:8.2f} µs")


if __name__ == "__main__":
    main()
