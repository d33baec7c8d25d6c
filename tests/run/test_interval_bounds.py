"""A long run's intervals stay bounded in its run directory: merged past MAX_INTERVALS, counts kept."""

from __future__ import annotations

import itertools
from pathlib import Path

import perfkit
from perfkit.monitor import StageMonitor
from perfkit.run import RunWriter, read_run
from perfkit.stages import Intervals, StageRecorder


def test_six_hundred_intervals_keep_at_most_the_limit_and_count_what_was_merged(tmp_path: Path) -> None:
    monitor = StageMonitor(say=lambda text: None, sinks=[RunWriter(tmp_path)], console=False)
    rec = StageRecorder(perfkit.Registry(), top_k_slowest=0, listeners=[monitor])
    rec.begin("train", 0, intervals=Intervals(steps=2, warmup_steps=0, always=True))
    for _ in range(1200):
        rec.step_begin("train")
        rec.step_end("train")
    rec.end("train")
    intervals = read_run(tmp_path).intervals
    assert len(intervals) <= 256
    assert sum(x.merged for x in intervals) == 600  # every interval is in one line
    assert intervals[0].steps[0] == 0
    assert intervals[-1].steps == (1198, 1199)
    assert all(a.steps[1] + 1 == b.steps[0] for a, b in itertools.pairwise(intervals))
    assert intervals[-1].merged == 1  # the newest at full resolution
    assert sum(x.metric("steps") or 0 for x in intervals) == 1200
