"""The schedule of a profiler window: which steps of a stage epoch warm up and which are recorded."""

from __future__ import annotations

from perfkit.torch._schedule import Schedule


def test_the_schedule_of_cycles() -> None:
    cycles = Schedule(skip_first=2, wait=1, warmup=1, active=3, repeat=2).cycles()
    assert [(c.warmup_start, c.record_start, c.end) for c in cycles] == [(3, 4, 7), (8, 9, 12)]
