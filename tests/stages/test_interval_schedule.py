"""When a stage epoch is cut by default: a first interval soon after the warm-up, intervals growing
to a minute, and a long epoch known by its pace; a short epoch never (docs/intervals.md)."""

from __future__ import annotations

import perfkit
from perfkit.stages import Intervals, StageListener, StageRecorder, StageWindow
from tests.conftest import FakeClock


class Cuts(StageListener):
    def __init__(self) -> None:
        self.steps: list[tuple[int, int]] = []

    def interval_ended(self, window: StageWindow) -> None:
        if window.scope == "interval" and window.steps is not None:
            self.steps.append(window.steps)


def epoch(
    steps: int, step_ms: float, *, long: bool = False, expected: int | None = None
) -> list[tuple[int, int]]:
    """The intervals of one default-planned train epoch of ``steps`` steps, ``step_ms`` each."""
    clock = FakeClock()
    cuts = Cuts()
    rec = StageRecorder(perfkit.Registry(clock=clock), top_k_slowest=0, listeners=[cuts])
    rec.begin("train", 0, intervals=Intervals())
    if long:
        rec.mark_long("train")
    if expected is not None:
        rec.expect_steps("train", expected)
    for _ in range(steps):
        rec.step_begin("train")
        clock.advance(int(step_ms * 1e6))
        rec.step_end("train")
    rec.end("train")
    return cuts.steps


def test_slow_steps_get_a_first_interval_after_10_s_then_20_40_and_60_s() -> None:
    got = epoch(2000, 100.0, long=True)  # 10 steps a second
    assert got[:5] == [(10, 109), (110, 309), (310, 709), (710, 1309), (1310, 1909)]


def test_fast_steps_get_a_first_interval_after_300_steps_then_doubling_to_a_minute() -> None:
    got = epoch(15_000, 5.0, long=True)  # 200 steps a second
    assert got[:4] == [(10, 309), (310, 909), (910, 2109), (2110, 14109)]


def test_an_epoch_of_known_length_that_its_pace_makes_long_is_cut_from_its_first_interval() -> None:
    assert epoch(500, 100.0, expected=10_000)[:2] == [(10, 109), (110, 309)]  # 1,000 s at that pace


def test_an_epoch_of_known_length_shorter_than_three_minutes_is_never_cut() -> None:
    assert epoch(1_500, 100.0, expected=1_500) == []  # 150 s
    assert epoch(1_500, 100.0) == []  # nor one whose length is not known, before 180 s


def test_the_intervals_cover_every_step_after_the_warm_up_the_epochs_last_ones_included() -> None:
    # 501 steps: the first interval ends at step 309, the next would at 909; the epoch ends first
    got = epoch(501, 5.0, long=True)
    assert got == [(10, 309), (310, 500)]
    covered = [s for first, last in got for s in range(first, last + 1)]
    assert covered == list(range(10, 501))  # each step after the warm-up once, the 501st included


def test_an_epoch_ending_right_after_a_cut_gets_no_empty_interval() -> None:
    assert epoch(310, 5.0, long=True) == [(10, 309)]
