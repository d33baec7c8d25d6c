"""Loop analysis: the wait share of a loop, and the workers that would stop it waiting."""

from __future__ import annotations

import numpy as np
import pytest

import perfkit
from perfkit import Registry
from perfkit._context import ThreadInfo
from perfkit._transfer import RecordBatch
from perfkit.stages import all_loops, loop_stats
from tests.conftest import FakeClock

MS = 1_000_000


def worker_fetches(worker: int, durations_ms: list[int]) -> RecordBatch:
    """Records as a DataLoader worker would hand them over: one ``train.data.fetch`` per batch."""
    n = len(durations_ms)
    return RecordBatch(
        threads=(ThreadInfo(pid=10_000 + worker, tid=1, name="MainThread", worker=worker),),
        paths=((0, ("train.data.fetch",)),),
        overlay=(),
        nodes=np.zeros(n, dtype=np.int64),
        starts=np.arange(n, dtype=np.int64) * 100 * MS,
        durations=np.array(durations_ms, dtype=np.int64) * MS,
        errors=np.zeros(n, dtype=np.bool_),
        dropped=0,
    )


def loop(reg: Registry, clock: FakeClock, items: int, wait_ms: int, body_ms: int) -> None:
    def source():  # type: ignore[no-untyped-def]
        for i in range(items):
            clock.advance(wait_ms * MS)
            yield i

    for _ in perfkit.timed_iter(source(), "train", registry=reg):
        clock.advance(body_ms * MS)


def test_wait_share_and_means_of_a_plain_loop(reg: Registry, clock: FakeClock) -> None:
    loop(reg, clock, items=4, wait_ms=30, body_ms=10)
    stats = loop_stats(reg.snapshot(), "train")
    assert stats is not None
    assert (stats.items, stats.wait_share) == (4, pytest.approx(0.75))
    assert (stats.wait_mean_s, stats.loop_mean_s) == (pytest.approx(0.030), pytest.approx(0.010))
    assert stats.workers_needed is None


def test_workers_needed_from_worker_time_and_loop_time(reg: Registry, clock: FakeClock) -> None:
    loop(reg, clock, items=4, wait_ms=30, body_ms=10)
    reg.receive(worker_fetches(0, [40, 40, 40, 40]))
    stats = loop_stats(reg.snapshot(), "train")
    assert stats is not None
    assert (stats.worker_mean_s, stats.workers, stats.workers_needed) == (pytest.approx(0.040), 1, 4)
    text = perfkit.report(reg.snapshot())
    assert "a batch costs a worker 4.0 loop turns, 1 worker now" in text
    assert "keep" not in text  # no count that keeps up: that is the verdict's, which weighs the cores


def test_enough_workers_keep_up(reg: Registry, clock: FakeClock) -> None:
    loop(reg, clock, items=4, wait_ms=1, body_ms=20)
    reg.receive(worker_fetches(0, [30, 30]))
    reg.receive(worker_fetches(1, [30, 30]))
    stats = loop_stats(reg.snapshot(), "train")
    assert stats is not None
    assert (stats.workers, stats.workers_needed) == (2, 2)
    assert "a batch costs a worker 1.5 loop turns, 2 workers now" in perfkit.report(reg.snapshot())


def test_a_loop_without_turns_has_no_stats(reg: Registry) -> None:
    assert loop_stats(reg.snapshot(), "train") is None
    assert all_loops(reg.snapshot()) == []
