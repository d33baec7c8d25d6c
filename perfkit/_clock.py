"""Clocks: a callable returning integer nanoseconds from a monotonic source.

A registry owns its clock, and every entry point reads time through it, so a
test can pass a fake clock instead of sleeping. Durations are clamped at zero
when records are aggregated, so a clock that steps backwards never yields a
negative duration.
"""

from __future__ import annotations

import time
from collections.abc import Callable

Clock = Callable[[], int]
"""A zero-argument callable returning nanoseconds; only differences matter."""

monotonic_ns: Clock = time.perf_counter_ns
"""The default clock. On Linux it reads CLOCK_MONOTONIC, shared by all processes of the machine,
so records made in DataLoader workers line up with those of the main process."""
