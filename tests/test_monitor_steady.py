"""The console's answer is steady: two causes within five points do not swap places from epoch to
epoch on noise alone; a cause that clearly overtakes does."""

from __future__ import annotations

import perfkit
from perfkit.monitor import StageMonitor
from perfkit.names import step_series, wait_series
from perfkit.stages import StageWindow
from tests.conftest import FakeClock
from tests.stages.windows import stage_window

MS = 1_000_000


def epoch(reg: perfkit.Registry, clock: FakeClock, n: int, wait_ms: float, section_ms: float) -> StageWindow:
    """An epoch of 10 steps: each waits ``wait_ms`` for its batch, then runs a section in its step."""
    since = reg.cursor()
    for _ in range(10):
        t = clock()
        clock.advance(round(wait_ms * MS))
        reg.record(wait_series("train"), t, clock())
        t = clock()
        with perfkit.section("augment", registry=reg):
            clock.advance(round(section_ms * MS))
        clock.advance(round((100 - wait_ms - section_ms) * MS))
        reg.record(step_series("train"), t, clock())
    return stage_window("train", n, reg.snapshot(since=since), wall_s=1.0)


def tops(reg: perfkit.Registry, clock: FakeClock, shares: list[tuple[float, float]]) -> list[str]:
    monitor = StageMonitor(say=lambda text: None, console=False)
    out = []
    for n, (wait, section) in enumerate(shares):
        top = monitor.top_verdict(epoch(reg, clock, n, wait, section))
        assert top is not None
        out.append(top.kind)
    return out


def test_two_causes_within_five_points_keep_their_order(reg: perfkit.Registry, clock: FakeClock) -> None:
    assert tops(reg, clock, [(40, 37), (37, 40), (39, 38)]) == ["INPUT_BOUND"] * 3


def test_a_cause_that_clearly_overtakes_comes_first(reg: perfkit.Registry, clock: FakeClock) -> None:
    assert tops(reg, clock, [(40, 37), (30, 50)]) == ["INPUT_BOUND", "SLOW_SECTION"]
