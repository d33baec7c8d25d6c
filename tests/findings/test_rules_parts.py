"""The rules one level below the account, on hand-built stage epochs (a fake clock, a wall time of
one second, so a share is the planted seconds): the step's parts (OPTIMIZER_STEP, SLOW_BACKWARD),
where a wait went (SLOW_SAMPLER, BATCH_TRANSFER), and one slow DataLoader worker (SLOW_WORKER).
Each fires with the share its numbers give, is silent just below its threshold, and says nothing
where its part was not timed."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

import perfkit
from perfkit._context import ThreadInfo
from perfkit._transfer import RecordBatch
from perfkit.findings import diagnose_windows
from perfkit.names import step_part_series, wait_part_series
from tests.conftest import FakeClock
from tests.findings.test_rules import MS, Epoch, case, epoch, fires, judged

__all__ = ["epoch"]  # the fixture, used by name
Make = Callable[[str], Epoch]


def parts(epoch: Make, *, forward: float, backward: float, optimizer: float, steps: int = 10) -> Epoch:
    """``steps`` training steps with their parts planted (ms each); a step is the parts' sum."""
    e = epoch("train")
    for _ in range(steps):
        t = e.clock()
        for part, ms in (("forward", forward), ("backward", backward), ("optimizer", optimizer)):
            e.span(step_part_series("train", part), ms)
        e.reg.record("train.step", t, e.clock())
    return e


# ---- OPTIMIZER_STEP --------------------------------------------------------------------------------


def test_optimizer_step_fires_with_the_optimizers_share_and_names_the_fix(epoch: Make) -> None:
    window = parts(epoch, forward=20, backward=30, optimizer=25).window()  # 250 ms of 1 s
    v = fires("OPTIMIZER_STEP", case(window))
    assert (v.share, v.subject) == (pytest.approx(0.25), "optimizer")
    assert "25.00 ms in each of 10 steps" in v.message
    assert "fused=True" in v.action
    assert v.gain is None  # the change is code: its saving is not guessed


def test_optimizer_step_is_silent_below_a_sixth_of_the_epoch(epoch: Make) -> None:
    window = parts(epoch, forward=20, backward=30, optimizer=14).window()  # 140 ms
    assert judged("OPTIMIZER_STEP", case(window)) == []


def test_optimizer_step_says_nothing_without_the_steps_parts(epoch: Make) -> None:
    window = epoch("train").steps(*[90] * 10).window()
    assert judged("OPTIMIZER_STEP", case(window)) == []


def test_an_optimizer_step_is_served_before_compute_bound_and_nothing_is_claimed_twice(epoch: Make) -> None:
    window = parts(epoch, forward=20, backward=30, optimizer=40).window()  # step 90%, optimizer 40%
    shares = {v.kind: v.share for v in diagnose_windows([window], cores=4).verdicts}
    assert shares["OPTIMIZER_STEP"] == pytest.approx(0.40)
    assert shares["COMPUTE_BOUND"] == pytest.approx(0.50)  # the step's 90% less the optimizer's 40%


# ---- SLOW_BACKWARD ---------------------------------------------------------------------------------


def test_slow_backward_fires_for_a_backward_far_past_twice_its_forward(epoch: Make) -> None:
    window = parts(epoch, forward=10, backward=40, optimizer=1).window()  # 400 ms, 4x forward
    v = fires("SLOW_BACKWARD", case(window))
    assert v.share == pytest.approx(0.40)
    assert "4.0x its forward" in v.message
    assert "ProfilerCallback(profile_epochs=[1], stages=['train'])" in v.action


def test_slow_backward_is_silent_below_its_threshold_or_at_twice_the_forward(epoch: Make) -> None:
    assert judged("SLOW_BACKWARD", case(parts(epoch, forward=10, backward=29, optimizer=1).window())) == []
    assert judged("SLOW_BACKWARD", case(parts(epoch, forward=20, backward=40, optimizer=1).window())) == []


def test_slow_backward_says_nothing_without_the_steps_parts(epoch: Make) -> None:
    assert judged("SLOW_BACKWARD", case(epoch("train").steps(*[90] * 10).window())) == []


# ---- SLOW_SAMPLER and BATCH_TRANSFER ---------------------------------------------------------------


def waits(epoch: Make, *, part: str, part_ms: float, wait_ms: float) -> Epoch:
    """10 batches: each wait of ``wait_ms`` holding ``part_ms`` of ``part`` in this process."""
    e = epoch("train")
    for _ in range(10):
        t = e.clock()
        e.span(wait_part_series("train", part), part_ms)
        e.clock.advance(round((wait_ms - part_ms) * MS))
        e.reg.record("train.data.wait", t, e.clock())
        e.steps(20)
    return e


def test_slow_sampler_fires_with_its_time_in_the_waits_and_a_gain_of_about_it(epoch: Make) -> None:
    v = fires("SLOW_SAMPLER", case(waits(epoch, part="sampler", part_ms=8, wait_ms=10).window()))
    assert v.share == pytest.approx(0.08)
    assert "more workers cannot hide it" in v.message
    assert v.gain == pytest.approx((0.072, 0.08))


def test_slow_sampler_is_silent_below_a_twentieth_of_the_epoch(epoch: Make) -> None:
    assert judged("SLOW_SAMPLER", case(waits(epoch, part="sampler", part_ms=4.9, wait_ms=10).window())) == []


def test_slow_sampler_says_nothing_where_the_waits_were_not_split(epoch: Make) -> None:
    window = epoch("train").waits(*[10] * 10).steps(*[20] * 10).window()
    assert judged("SLOW_SAMPLER", case(window)) == []


def test_batch_transfer_fires_with_the_time_spent_rebuilding_workers_batches(epoch: Make) -> None:
    v = fires("BATCH_TRANSFER", case(waits(epoch, part="receive", part_ms=7, wait_ms=12).window()))
    assert (v.share, v.subject) == (pytest.approx(0.07), "transfer")
    assert "rebuilding the workers' batches 70.00 ms" in v.message


def test_batch_transfer_is_silent_below_a_twentieth_of_the_epoch(epoch: Make) -> None:
    assert judged("BATCH_TRANSFER", case(waits(epoch, part="receive", part_ms=4, wait_ms=12).window())) == []


def test_batch_transfer_says_nothing_where_the_waits_were_not_split(epoch: Make) -> None:
    window = epoch("train").waits(*[12] * 10).steps(*[20] * 10).window()
    assert judged("BATCH_TRANSFER", case(window)) == []


# ---- SLOW_WORKER -----------------------------------------------------------------------------------


def fetched(worker: int, ms: list[float], cpu_ms: list[float]) -> RecordBatch:
    """A DataLoader worker's records as it hands them over: each batch's fetch and its CPU time."""
    n = len(ms)
    return RecordBatch(
        threads=(ThreadInfo(pid=10_000 + worker, tid=1, name="MainThread", worker=worker),),
        paths=((0, ("train.data.fetch",)), (0, ("train.data.fetch_cpu",))),  # (thread, path)
        overlay=(1,),
        nodes=np.repeat(np.array([0, 1], dtype=np.int64), n),
        starts=np.tile(np.arange(n, dtype=np.int64) * 100 * MS, 2),
        durations=(np.array([*ms, *cpu_ms]) * MS).astype(np.int64),
        errors=np.zeros(2 * n, dtype=np.bool_),
        dropped=0,
    )


def workers_epoch(reg: perfkit.Registry, clock: FakeClock, slow_ms: float, wait_ms: float) -> Epoch:
    """Three workers, 4 batches each: two at 40 ms a batch, worker 2 at ``slow_ms`` (5% CPU)."""
    e = Epoch(reg, clock, "train")
    e.waits(*[wait_ms] * 12).steps(*[10] * 12)
    for worker in (0, 1):
        reg.receive(fetched(worker, [40.0] * 4, [38.0] * 4))
    reg.receive(fetched(2, [slow_ms] * 4, [slow_ms * 0.05] * 4))
    return e


def test_slow_worker_fires_for_one_worker_past_the_others_and_says_it_waits(
    reg: perfkit.Registry, clock: FakeClock
) -> None:
    """Handed one batch in 3, worker 2's 120 ms set the loop's pace at 40 ms a batch (its own 10 ms
    and 30 ms of waiting); as fast as the others (40 ms: 13.3 ms a batch) the loop would turn at
    13.3 ms: 26.7 ms of each 40 ms saved."""
    window = workers_epoch(reg, clock, slow_ms=120, wait_ms=30).window(wall_s=0.48)  # 12 batches of 40 ms
    v = fires("SLOW_WORKER", case(window))
    assert v.subject == "worker 2"
    assert v.share == pytest.approx((40 - 40 / 3) / 40)
    assert "3.0x" in v.message
    assert "5% CPU: waiting" in v.message


def test_slow_worker_is_silent_where_the_loop_is_slower_than_its_pace(
    reg: perfkit.Registry, clock: FakeClock
) -> None:
    """Its 120 ms one batch in 3 is 40 ms a batch; the loop's own 53 ms a batch (a second's epoch less
    its waits, over 12 batches) hides it: the waits are not its."""
    window = workers_epoch(reg, clock, slow_ms=120, wait_ms=30).window()
    assert judged("SLOW_WORKER", case(window)) == []


def test_slow_worker_is_silent_below_one_and_a_half_times_the_others(
    reg: perfkit.Registry, clock: FakeClock
) -> None:
    window = workers_epoch(reg, clock, slow_ms=55, wait_ms=30).window()  # 1.4x: no one worker's
    assert judged("SLOW_WORKER", case(window)) == []


def test_slow_worker_says_nothing_without_worker_records(epoch: Make) -> None:
    window = epoch("train").waits(*[30] * 12).steps(*[10] * 12).window()
    assert judged("SLOW_WORKER", case(window)) == []
