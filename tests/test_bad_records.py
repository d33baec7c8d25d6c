"""No input can poison a registry (issue 14, item 1).

A start or end of 2**64, a str, None or NaN used to reach numpy and fail every later
drain: every snapshot raised, the user's own ``with perfkit.section(...)`` raised at the
4096th record, and the pending list grew forever. ``record`` now refuses such values with
an error naming them, and a drain that meets one anyway (a clock that misbehaves
mid-run) drops those records and counts them.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

import perfkit
from perfkit import PerfkitWarning, Registry
from perfkit._buffer import DRAIN_AT
from tests.conftest import FakeClock


@pytest.mark.parametrize(
    ("bad", "error", "message"),
    [
        (2**64, ValueError, "start_ns must be within 2\\*\\*61 ns of zero, got 18446744073709551616"),
        ("5", TypeError, "start_ns must be an int of nanoseconds .*, got '5' of type str"),
        (None, TypeError, "start_ns must be an int of nanoseconds .*, got None"),
        (math.nan, TypeError, "start_ns must be an int of nanoseconds .*, got nan of type float"),
        (True, TypeError, "start_ns must be an int of nanoseconds .*, got True of type bool"),
    ],
)
def test_record_refuses_a_bad_start_naming_it_and_the_registry_goes_on(
    reg: Registry, bad: Any, error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        reg.record("step", bad, 1_000)
    with pytest.raises(error, match=message.replace("start_ns", "end_ns")):
        reg.record("step", 1_000, bad)
    for _ in range(5000):  # past the 4096th record, where a drain runs inside the section
        with perfkit.section("step", registry=reg):
            pass
    assert reg.snapshot()["step"].count == 5000


class UnrulyClock(FakeClock):
    """A clock that returns ``bad`` while ``unruly`` is set (a broken clock seam mid-run)."""

    def __init__(self) -> None:
        super().__init__()
        self.unruly = False
        self.bad: Any = None

    def __call__(self) -> Any:
        return self.bad if self.unruly else self.now


@pytest.mark.parametrize("bad", [2**64, None, math.nan, -(2**63)])
def test_records_a_bad_clock_made_are_dropped_counted_and_every_later_snapshot_works(bad: Any) -> None:
    clock = UnrulyClock()
    reg = Registry(capacity=100, clock=clock)
    with pytest.warns(PerfkitWarning, match="records with a start or end that is not an int"):
        clock.unruly, clock.bad = True, bad
        for _ in range(3):
            with perfkit.section("poisoned", registry=reg):
                pass
        clock.unruly = False
        for _ in range(DRAIN_AT):  # several drains on the recording thread
            with perfkit.section("fine", registry=reg):
                clock.advance(1_000)
        snap = reg.snapshot()
    assert snap["fine"].count == DRAIN_AT
    assert snap["fine"].total_s == DRAIN_AT * 1e-6
    assert "poisoned" not in snap
    assert snap.dropped == {"invalid records": 3}
    assert len(reg._buf) == 0  # nothing left pending: the list does not grow
    assert reg.snapshot(since=reg.cursor()).dropped == {}  # the next window lost nothing


def test_a_clock_of_float_seconds_is_refused_at_construction() -> None:
    import time

    with pytest.raises(TypeError, match=r"clock\(\) must be an int of nanoseconds .* of type float"):
        Registry(clock=time.perf_counter)
