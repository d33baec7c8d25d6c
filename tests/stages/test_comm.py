"""A step split into each rank's compute and its exposed waits in collectives, per step part; what
``communication`` and ``straggler_parts`` read of it, through the merge's row and the run directory.

Each rank is a real ``StageRecorder`` on a fake clock, its collectives' waits recorded where the rank
is (``StageRecorder.part_now``), as ``perfkit.torch.time_collectives`` records them.
"""

from __future__ import annotations

import pytest

import perfkit
from perfkit.names import collective_bytes_gauge, collective_series
from perfkit.stages import (
    Account,
    RankPart,
    RankResult,
    StageRecorder,
    StageWindow,
    communication,
    stage_metrics,
    straggler_parts,
)
from perfkit.stages._merge import _from_row, _pack, mean_account
from tests.conftest import FakeClock

STEPS = 10
MB = 1_000_000


def one_rank(
    rank: int, *, forward_s: float = 0.004, gather_s: float = 0.001, scatter_s: float = 0.002
) -> RankResult:
    """10 steps: forward (``forward_s`` of compute, then the next layer's all-gather, ``gather_s``),
    backward (3 ms of compute and a reduce-scatter, ``scatter_s``), the optimizer (1 ms)."""
    clock = FakeClock()
    reg = perfkit.Registry(clock=clock)
    captured: list[RankResult] = []

    def capture(r: RankResult) -> list[RankResult]:
        captured.append(r)
        return [r]

    rec = StageRecorder(reg, gather=capture, rank=rank)

    def collective(name: str, seconds: float, nbytes: float) -> None:
        t0 = clock.now
        reg.gauge(collective_bytes_gauge(name), nbytes)
        clock.advance(round(seconds * 1e9))
        reg.record(collective_series(rec.part_now(), name), t0, clock.now)

    rec.begin("train", 0)
    for _ in range(STEPS):
        rec.step_begin("train")
        clock.advance(round(forward_s * 1e9))
        collective("all_gather", gather_s, 4 * MB)
        rec.part_begin("backward")
        clock.advance(3_000_000)
        collective("reduce_scatter", scatter_s, 2 * MB)
        rec.part_end("backward")
        rec.part_begin("optimizer")
        clock.advance(1_000_000)
        rec.part_end("optimizer")
        rec.step_end("train")
    collective("all_reduce", 0.0005, 8)  # an epoch-end metric's sync: between steps
    rec.end("train")
    return captured[0]


def window_of(results: list[RankResult]) -> StageWindow:
    """The window the recorder would make of these ranks' results (as ``StageRecorder._window``)."""
    first = results[0]
    assert first.snapshot is not None
    return StageWindow(
        "train",
        0,
        first.snapshot,
        max(r.wall_s for r in results),
        mean_account(results),
        ranks=tuple(RankPart(r.rank, r.wall_s, r.steps, r.step_mean_s, r.account) for r in results),
    )


def test_a_ranks_step_is_its_compute_and_its_waits_per_part() -> None:
    account = one_rank(0).account
    assert account.subjects["collective_wait"] == pytest.approx(
        {"forward": 0.010, "backward": 0.020, "outside": 0.0005}
    )
    assert account.subjects["collectives"] == pytest.approx(
        {"all_gather": 0.010, "reduce_scatter": 0.020, "all_reduce": 0.0005}
    )
    assert account.subjects["collective_bytes"] == {
        "all_gather": 40 * MB,
        "reduce_scatter": 20 * MB,
        "all_reduce": 8,
    }
    assert account.subjects["collective_calls"] == {"all_gather": 10, "reduce_scatter": 10, "all_reduce": 1}
    assert account.overlays["collective_wait"] == pytest.approx(0.030)  # in the steps only
    assert account.compute_s() == pytest.approx(account.seconds("step") - 0.030)
    assert account.subjects["step"]["forward"] == pytest.approx(0.050)  # waits inside their part


def test_communication_is_the_epochs_share_by_part_and_collective_with_bytes_per_step() -> None:
    window = window_of([one_rank(0)])
    c = communication(window)
    assert c is not None
    assert c.wait_s == pytest.approx(0.0305)
    assert c.share == pytest.approx(0.0305 / window.wall_s)
    assert c.top == "reduce_scatter"
    assert c.bytes_per_step == pytest.approx(
        {"all_gather": 4 * MB, "reduce_scatter": 2 * MB, "all_reduce": 0.8}
    )
    assert c.calls_per_step["all_gather"] == 1.0
    metrics = stage_metrics(window)
    assert metrics["perf/train/communication/wait_fraction"] == pytest.approx(c.share)
    assert metrics["perf/train/communication/forward/wait_s"] == pytest.approx(0.010)
    assert metrics["perf/train/communication/all_gather/bytes_per_step"] == 4 * MB
    assert metrics["perf/train/time/step/collective_wait_s"] == pytest.approx(0.030)
    assert not any("/series/dist." in k for k in metrics)  # perfkit's own series, not a user's


def test_the_slow_ranks_forward_is_located_and_the_others_wait_in_the_all_gather() -> None:
    ranks = [one_rank(0, gather_s=0.006), one_rank(1, forward_s=0.009), one_rank(2, gather_s=0.006)]
    found = straggler_parts(window_of(ranks))
    assert found is not None
    assert (found.rank, found.part) == (1, "forward")
    assert found.excess_s["forward"] == pytest.approx(0.050)  # 5 ms a step, its waits taken out
    assert found.excess_s["backward"] == pytest.approx(0.0)
    assert found.others_wait_s["all_gather"] == pytest.approx(0.060)
    assert found.others_wait_by_part["forward"] == pytest.approx(0.060)
    assert found.steps == STEPS


def test_ddps_gradient_sync_is_an_all_reduce_in_backward() -> None:
    account = Account(
        1.0, {"step": 0.8}, {"step": {"forward": 0.3, "backward": 0.5}}, overlays={"sync_wait": 0.2}
    )
    window = StageWindow("train", 0, perfkit.Registry().snapshot(), 1.0, account)
    c = communication(window)
    assert c is not None
    assert (dict(c.by_part), dict(c.by_collective), c.share) == ({"backward": 0.2}, {"all_reduce": 0.2}, 0.2)


def test_nothing_timed_is_no_communication_and_one_rank_no_straggler() -> None:
    window = StageWindow("val", 0, perfkit.Registry().snapshot(), 1.0, Account.empty(1.0))
    assert communication(window) is None
    assert straggler_parts(window_of([one_rank(0)])) is None


def test_a_row_carries_the_step_parts_and_the_waits_by_part_above_exact_max() -> None:
    slow = one_rank(1, forward_s=0.009)
    assert slow.snapshot is not None
    back = _from_row(1, _pack(slow, sorted(f"S:{n}" for n in slow.snapshot))[3])
    for subject in ("step", "collective_wait"):  # at fixed keys: the parts that took any time
        sent = {k: s for k, s in slow.account.subjects[subject].items() if s > 0}
        assert back.account.subjects[subject] == pytest.approx(sent)
    assert back.account.overlays == pytest.approx(dict(slow.account.overlays))
    # the slow rank known by its row alone is still located
    found = straggler_parts(window_of([one_rank(0, gather_s=0.006), back, one_rank(2, gather_s=0.006)]))
    assert found is not None
    assert (found.rank, found.part) == (1, "forward")


def test_the_run_directorys_window_reads_the_same() -> None:
    window = window_of([one_rank(0), one_rank(1)])
    back = StageWindow.from_dict(window.to_dict(), window.snapshot)
    assert communication(back) == communication(window)
