"""One owner per second: a stage epoch's verdicts are disjoint pieces of its time.

Partition rules on hand-built verdicts (``partition``), then through the whole judgement of a
hand-built epoch (``judge``): a symptom is folded into its cause, the most specific cause owns a
second, an epoch's shares add up to at most 100%, the first batch's ordinary production is the
loader's steady wait and not the epoch's start, a verdict under the run's floor is context, and
a leak that would exhaust memory soon ranks first.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

import perfkit
from perfkit._context import ThreadInfo
from perfkit._rule import Verdict, verdict
from perfkit._transfer import RecordBatch
from perfkit.findings import Case, diagnose_windows, judge
from perfkit.findings._partition import partition
from perfkit.names import iter_series, step_series, wait_series
from perfkit.stages import StageWindow
from tests.conftest import FakeClock
from tests.stages.windows import stage_window

MS = 1_000_000


def made(kind: str, share: float, part: str | None, subject: str | None = None, message: str = "") -> Verdict:
    return replace(verdict(share, message or kind.lower(), subject=subject), kind=kind, part=part)


# ---- partition, on verdicts ---------------------------------------------------------------------


def test_a_section_owns_its_seconds_and_the_step_verdict_keeps_the_rest() -> None:
    found = partition([made("COMPUTE_BOUND", 0.6, "step"), made("SLOW_SECTION", 0.4, "step")], {"step": 0.6})
    assert [(v.kind, round(v.share, 3)) for v in found] == [("SLOW_SECTION", 0.4), ("COMPUTE_BOUND", 0.2)]


def test_the_epochs_start_is_served_before_the_steady_wait_and_the_shares_never_pass_the_part() -> None:
    found = partition(
        [made("INPUT_BOUND", 0.7, "data_wait"), made("EPOCH_BOUNDARY", 0.2, "data_wait")], {"data_wait": 0.8}
    )
    assert [(v.kind, round(v.share, 3)) for v in found] == [("EPOCH_BOUNDARY", 0.2), ("INPUT_BOUND", 0.6)]
    assert sum(v.share for v in found) <= 0.8


def test_evaluation_slower_than_training_is_context_of_the_cause_that_owns_the_difference() -> None:
    symptom = made(
        "EVAL_SLOWER_THAN_TRAIN", 0.66, None, subject="data wait", message="validation takes 3.0x ..."
    )
    boundary = made("EPOCH_BOUNDARY", 0.65, "data_wait")
    (found,) = partition([symptom, boundary], {"data_wait": 0.9})
    assert found.kind == "EPOCH_BOUNDARY"
    assert found.context == "validation takes 3.0x ..."
    assert found.said.startswith("validation takes 3.0x ...; ")


def test_a_symptom_no_cause_claims_stays_with_the_part_it_names() -> None:
    symptom = made("EVAL_SLOWER_THAN_TRAIN", 0.5, None, subject="other")
    (found,) = partition([symptom], {"other": 0.6})
    assert (found.kind, found.part, found.share) == ("EVAL_SLOWER_THAN_TRAIN", "other", 0.5)


def test_steps_that_slowed_while_memory_grew_say_both_in_the_step_verdict() -> None:
    found = partition(
        [
            made("COMPUTE_BOUND", 0.7, "step"),
            made("REGRESSION", 0.3, None, message="steps got slower"),
            made("MEMORY_GROWTH", 0.0, None, message="memory grew 44%"),
        ],
        {"step": 0.7},
    )
    assert sorted(v.kind for v in found) == ["COMPUTE_BOUND", "MEMORY_GROWTH"]  # no REGRESSION of its own
    (step,) = [v for v in found if v.kind == "COMPUTE_BOUND"]
    assert step.context == "steps got slower; memory grew 44%"


# ---- through the judgement of a hand-built epoch ---------------------------------------------------


def span(reg: perfkit.Registry, clock: FakeClock, name: str, ms: float) -> None:
    t = clock()
    clock.advance(round(ms * MS))
    reg.record(name, t, clock())


def fetches(worker: int, durations_ms: list[float]) -> RecordBatch:
    """A DataLoader worker's records, as it hands them over: one ``val.data.fetch`` per batch."""
    n = len(durations_ms)
    return RecordBatch(
        threads=(ThreadInfo(pid=10_000 + worker, tid=1, name="MainThread", worker=worker),),
        paths=((0, ("val.data.fetch",)),),
        overlay=(),
        nodes=np.zeros(n, dtype=np.int64),
        starts=np.arange(n, dtype=np.int64) * 100 * MS,
        durations=(np.array(durations_ms) * MS).astype(np.int64),
        errors=np.zeros(n, dtype=np.bool_),
        dropped=0,
    )


def loader_epoch(reg: perfkit.Registry, clock: FakeClock, *, first_ms: float, wait_ms: float) -> StageWindow:
    """An epoch of 10 batches made in one worker at 80 ms each: the first waits ``first_ms``."""
    since = reg.cursor()
    span(reg, clock, iter_series("val"), 1)
    for i in range(10):
        span(reg, clock, wait_series("val"), first_ms if i == 0 else wait_ms)
        span(reg, clock, step_series("val"), 10)
    reg.receive(fetches(0, [80.0] * 10))
    snapshot = reg.snapshot(since=since)
    wall_s = (snapshot.end_ns - snapshot.start_ns) / 1e9
    return stage_window("val", 0, snapshot, wall_s=wall_s)


def alone(window: StageWindow) -> Case:
    return Case(window, (), None, cores=4, stage_wall_s=window.wall_s, run_wall_s=window.wall_s)


def test_a_first_batch_that_waits_only_for_its_making_is_the_loaders_steady_wait(
    reg: perfkit.Registry, clock: FakeClock
) -> None:
    """Every batch takes 80 ms in the worker: the first arrives 80 ms after iter(), 70 ms later
    than the steady 10 ms; that is production, not a cost of starting over."""
    found, _ = judge(alone(loader_epoch(reg, clock, first_ms=80, wait_ms=10)))
    assert "EPOCH_BOUNDARY" not in [v.kind for v in found]
    (wait,) = [v for v in found if v.kind == "INPUT_BOUND"]
    assert wait.share == pytest.approx((80 + 9 * 10) / 271, abs=0.01)  # every wait but iter()


def test_a_worker_init_that_delays_the_first_batch_is_the_epochs_start_and_only_that(
    reg: perfkit.Registry, clock: FakeClock
) -> None:
    """The first batch waits 280 ms: 80 ms to make it, 200 ms more (a slow worker_init_fn)."""
    window = loader_epoch(reg, clock, first_ms=280, wait_ms=10)
    found, _ = judge(alone(window))
    kinds = {v.kind: v for v in found}
    start = kinds["EPOCH_BOUNDARY"]
    assert start.share == pytest.approx((1 + 200) / (window.wall_s * 1e3), abs=0.01)
    assert "worker_init_fn" in start.action
    assert kinds["INPUT_BOUND"].share == pytest.approx((80 + 9 * 10) / (window.wall_s * 1e3), abs=0.01)
    assert sum(v.share for v in found) <= 1.0


def test_a_verdict_under_the_runs_floor_is_context(reg: perfkit.Registry, clock: FakeClock) -> None:
    """Training is 99% of the run; validation's wait is real but 0.6% of the run."""
    since = reg.cursor()
    for _ in range(10):
        span(reg, clock, step_series("train"), 990)
    train = stage_window("train", 0, reg.snapshot(since=since), wall_s=9.9)
    since = reg.cursor()
    for _ in range(3):
        span(reg, clock, wait_series("val"), 20)
        span(reg, clock, step_series("val"), 13)
    val = stage_window("val", 0, reg.snapshot(since=since), wall_s=0.1)
    d = diagnose_windows([train, val], cores=4)
    assert [v.kind for v in d.verdicts] == ["COMPUTE_BOUND"]
    assert [(v.kind, v.stage) for v in d.context] == [("INPUT_BOUND", "val")]


def test_a_leak_that_would_exhaust_memory_within_a_day_ranks_first(
    reg: perfkit.Registry, clock: FakeClock
) -> None:
    windows = []
    for epoch, rss in enumerate((1000.0, 1400.0, 1800.0)):
        since = reg.cursor()
        reg.gauge("process.rss_mb", rss)
        reg.gauge("system.memory_available_mb", 4000.0)
        for _ in range(10):
            span(reg, clock, step_series("train"), 100)
        windows.append(stage_window("train", epoch, reg.snapshot(since=since), wall_s=1.0))
    d = diagnose_windows(windows, cores=4)
    first = d.verdicts[0]
    assert (first.kind, first.severity) == ("MEMORY_GROWTH", "critical")
    assert first.evidence["epochs_to_exhaustion"] == pytest.approx(4000 / 400)
    assert "would run out in 10.0 epochs" in first.message
    assert d.verdicts[1].kind == "COMPUTE_BOUND"


def test_each_run_rule_but_the_symptoms_and_memory_claims_one_account_part() -> None:
    from perfkit.findings import RULES
    from perfkit.stages import PARTS

    claims = {r.kind: r.claims for r in RULES}
    assert {k for k, part in claims.items() if part is None} == {
        "EVAL_SLOWER_THAN_TRAIN",  # a symptom: folded into its cause
        "REGRESSION",  # a symptom
        "GPU_IDLE",  # a symptom: said with the cause that claims the part explaining it
        "STRAGGLER",  # names its part per verdict (the rank's data or its step)
        "MEMORY_GROWTH",  # claims no time
    }
    assert {part for part in claims.values() if part is not None} <= set(PARTS)
