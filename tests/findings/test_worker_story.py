"""What workers would do for a loader is told once, the same way, in an epoch's console block, its
verdict line and the run's summary: the verdict's proposal where one is made, else its one reason.

The planted epoch (the fake clock, 20 batches): the loop waits 10 ms for each batch and works 10 ms
on it; 2 workers take 20 ms of CPU a batch; the model's threads keep 1 of the 2 usable cores busy.
By count 2 workers keep up (20 ms / 10 ms), but only one core is free for them: the cores are the
limit, and that is all any output may say about the worker count."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import perfkit
from perfkit._cli import main
from perfkit._context import ThreadInfo
from perfkit._transfer import RecordBatch
from perfkit.findings import diagnose_windows
from perfkit.monitor import StageMonitor
from perfkit.names import (
    MEMORY_AVAILABLE,
    TORCH_THREADS,
    USABLE_CORES,
    fetch_cpu_gauge,
    fetch_series,
    loop_cpu_gauge,
    setting_gauge,
    step_series,
    wait_cpu_gauge,
    wait_part_series,
    wait_series,
    worker_uss_gauge,
)
from perfkit.run import RunWriter
from perfkit.stages import StageWindow, stage_metrics
from tests.conftest import FakeClock
from tests.stages.windows import stage_window

MS = 1_000_000
BATCHES = 20


def fetches(worker: int, n: int, ms: float) -> RecordBatch:
    """A DataLoader worker's records as it hands them over: one ``train.data.fetch`` per batch."""
    return RecordBatch(
        threads=(ThreadInfo(pid=10_000 + worker, tid=1, name="MainThread", worker=worker),),
        paths=((0, (fetch_series("train"),)),),
        overlay=(),
        nodes=np.zeros(n, dtype=np.int64),
        starts=np.arange(n, dtype=np.int64) * 100 * MS,
        durations=np.full(n, round(ms * MS), dtype=np.int64),
        errors=np.zeros(n, dtype=np.bool_),
        dropped=0,
    )


def two_workers(
    reg: perfkit.Registry, clock: FakeClock, *, cores: float = 2.0, fetch_ms: float = 20.0
) -> StageWindow:
    """The planted epoch (see the module docstring): ``cores`` usable, a worker's batch ``fetch_ms``."""
    since = reg.cursor()
    for name, value in (("num_workers", 2.0), ("persistent_workers", 1.0)):
        reg.gauge(setting_gauge("train", name), value)
    reg.gauge(USABLE_CORES, cores)
    reg.gauge(TORCH_THREADS, 1.0)
    for _ in range(BATCHES):
        for name, ms in ((wait_series("train"), 10), (step_series("train"), 10)):
            t = clock()
            clock.advance(ms * MS)
            reg.record(name, t, clock())
        reg.gauge(wait_cpu_gauge("train"), 0.0)
        reg.gauge(loop_cpu_gauge("train"), 0.010)  # the model: one core busy
        reg.gauge(fetch_cpu_gauge("train"), 0.019)  # a batch is made by computing
    for worker in (0, 1):
        reg.receive(fetches(worker, BATCHES // 2, fetch_ms))
    return stage_window("train", 0, reg.snapshot(since=since), wall_s=BATCHES * 0.020)


COUNT_KEEPS_UP = ("should keep up", "keep up (", "2 needed")
CORES = "the cores, not the worker count, are the limit"


def test_the_console_block_tells_one_story(reg: perfkit.Registry, clock: FakeClock) -> None:
    said: list[str] = []
    StageMonitor(say=said.append).stage_ended(two_workers(reg, clock))
    [block] = said
    verdict = next(line for line in block.splitlines() if line.startswith("  verdict"))
    assert "INPUT_BOUND" in verdict
    assert CORES in verdict
    assert block.count("are the limit") == 1  # in the verdict line, not again in the data line
    assert not any(words in block for words in COUNT_KEEPS_UP), block
    data = next(line for line in block.splitlines() if line.startswith("  data"))
    assert "workers take 20.0 ms per batch (2 workers)" in data


def test_the_summary_tells_the_same_story(
    reg: perfkit.Registry, clock: FakeClock, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    window = two_workers(reg, clock)
    run = RunWriter(tmp_path / "run")
    run.add_window(window, stage_metrics(window))
    run.finish(reg.snapshot())
    assert main(["summary", str(tmp_path / "run")]) == 0
    text = " ".join(capsys.readouterr().out.split())  # the summary wraps its lines
    assert "INPUT_BOUND" in text
    assert CORES in text
    assert text.count("are the limit") == 1
    assert not any(words in text for words in COUNT_KEEPS_UP), text


def test_a_proposal_is_the_only_count_said(reg: perfkit.Registry, clock: FakeClock) -> None:
    """With 4 usable cores 3 are free for the workers: the verdict proposes the 3 that keep up with
    30 ms batches, with its gain, and the data line adds no count of its own."""
    said: list[str] = []
    StageMonitor(say=said.append).stage_ended(two_workers(reg, clock, cores=4.0, fetch_ms=30.0))
    [block] = said
    assert "set num_workers=3 on the train DataLoader" in block
    assert "expected gain" in block
    assert "needed" not in block
    assert "are the limit" not in block


def test_workers_that_keep_up_on_free_cores_send_the_search_elsewhere(
    reg: perfkit.Registry, clock: FakeClock
) -> None:
    said: list[str] = []
    StageMonitor(say=said.append).stage_ended(two_workers(reg, clock, cores=4.0))
    [block] = said
    assert "2 workers keep up" in block
    assert "the wait is not the workers' making, and where it went was not timed here" in block
    assert "are the limit" not in block
    assert "num_workers=" not in block


def test_workers_that_keep_up_name_where_the_wait_went_where_it_was_timed(
    reg: perfkit.Registry, clock: FakeClock
) -> None:
    """Each wait of 10 ms held 7 ms of rebuilding a worker's batch in this process: no guess."""
    window = two_workers(reg, clock, cores=4.0)
    for _ in range(BATCHES):
        t = clock()
        clock.advance(7 * MS)
        reg.record(wait_part_series("train", "receive"), t, clock())
    window = stage_window("train", 0, reg.snapshot(), wall_s=window.wall_s)
    verdicts = {v.kind: v for v in diagnose_windows([window], cores=4).verdicts}
    assert verdicts["BATCH_TRANSFER"].share == pytest.approx(0.35)  # 140 ms of 400: its own verdict
    assert "of the wait, 70% is rebuilding the workers' batches" in verdicts["INPUT_BOUND"].action


def test_where_memory_binds_the_verdict_and_its_change_say_so(
    reg: perfkit.Registry, clock: FakeClock
) -> None:
    """40 ms batches want 4 workers and 8 cores allow them; 2 workers of up to 900 MB (USS) and
    2,000 MB free at the least hold one more in the half kept spare: 3, memory the reason."""
    window = two_workers(reg, clock, cores=8.0, fetch_ms=40.0)
    for name, mb in ((worker_uss_gauge(0), 800.0), (worker_uss_gauge(1), 900.0), (MEMORY_AVAILABLE, 2000.0)):
        reg.gauge(name, mb)
    window = stage_window("train", 0, reg.snapshot(), wall_s=window.wall_s)
    said: list[str] = []
    StageMonitor(say=said.append).stage_ended(window)
    [block] = said
    assert "set num_workers=3 on the train DataLoader: 3 workers are all that the free memory holds" in block
    v = StageMonitor(say=said.append, console=False).top_verdict(window)
    assert v is not None
    assert (
        v.change["reason"]
        == "memory: 900 MB a worker (USS) against 2,000 MB free at the least, 50% of it kept spare"
    )


def test_a_pool_kept_already_is_not_told_to_keep_its_workers(reg: perfkit.Registry, clock: FakeClock) -> None:
    """The demo's loaders set persistent_workers=True, and its first batch of each epoch still
    waited 34 ms more than the others: EPOCH_BOUNDARY proposed persistent_workers=True, made."""
    since = reg.cursor()
    t = clock()
    clock.advance(60 * MS)  # the first batch, made while the loop waits
    reg.record(wait_series("train"), t, clock())
    window = two_workers(reg, clock)  # persistent_workers recorded as 1
    window = stage_window("train", 0, reg.snapshot(since=since), wall_s=window.wall_s + 0.060)
    (v,) = [x for x in diagnose_windows([window]).verdicts if x.kind == "EPOCH_BOUNDARY"]
    assert v.change == {}
    assert v.gain is None
    assert "kept between epochs already" in v.action
    assert "keep the workers" not in v.action
