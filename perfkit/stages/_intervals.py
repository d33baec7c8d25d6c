"""Interval windows: an answer while a long stage epoch is still running.

A stage epoch is one window; a long one (LLM training on ``max_steps`` over one pass, an
ImageNet epoch of an hour) would give its first numbers when it ends. ``Intervals`` tells a
``StageRecorder`` to also cut the open epoch into windows every ``steps`` steps or ``seconds``
seconds, without closing it (the epoch's own window stays exact over the whole epoch). The
first ``warmup_steps`` steps are cut first as a window of their own (scope ``warmup``):
compilation, worker start-up and cache fill make them unlike the rest, so they are reported
apart and the first interval starts after them. An epoch cut into intervals is cut once more as
it ends (``Cuts.trailing``): the steps after its last cut are its last interval, so its intervals
cover every step after the warm-up.

Left to itself (``always=False``, the default) the recorder cuts only epochs that are long: a
stage the driver marks long (a step-based loop: ``max_steps``, a loader without a length), an
epoch whose length the driver gave (``expected``) and that its steps so far project past
``long_after_s``, or an epoch still running after ``long_after_s``. A run of short epochs gets
exactly what it got before intervals existed.

Without a length given (neither ``steps`` nor ``seconds``), intervals grow: the first ends
``first_s`` seconds or ``first_steps`` steps after the warm-up, whichever comes first (an answer
before someone debugging a pipeline restarts it), each next one twice as long, up to
``steady_s`` seconds each (a minute: a line a minute is what a long run can be read at).

    >>> plan = Intervals(steps=100)
    >>> plan.steps, plan.seconds, plan.warmup_steps
    (100, None, 10)
    >>> [Intervals().bounds(k) for k in range(4)]
    [(300, 10.0), (600, 20.0), (1200, 40.0), (None, 60.0)]
"""

from __future__ import annotations

from dataclasses import dataclass

from .._registry import Registry
from .._validate import check_int, check_number
from ._segments import Segments

DEFAULT_S = 60.0
"""The steady length of an interval when none is given: a minute."""
FIRST_S = 10.0
"""The first interval after the warm-up when no length is given: 10 s..."""
FIRST_STEPS = 300
"""... or 300 steps, whichever comes first; the intervals after it double up to ``DEFAULT_S``."""
LONG_AFTER_S = 180.0
"""An epoch still running after three minutes is long: its intervals begin."""
WARMUP_STEPS = 10
"""Steps left out as warm-up at the start of each epoch (the loader's first batch, compilation)."""
MAX_SECONDS = 7 * 86400.0


@dataclass(frozen=True)
class Intervals:
    """When a stage epoch is cut into interval windows (see the module docstring).

    ``steps`` / ``seconds``: an interval ends after this many steps or seconds, whichever comes
    first (neither: ``first_s`` / ``first_steps`` after the warm-up, then doubling up to
    ``steady_s``). ``always``: cut every epoch, not only long ones.
    """

    steps: int | None = None
    seconds: float | None = None
    warmup_steps: int = WARMUP_STEPS
    always: bool = False
    long_after_s: float = LONG_AFTER_S
    first_s: float = FIRST_S
    first_steps: int = FIRST_STEPS
    steady_s: float = DEFAULT_S

    def __post_init__(self) -> None:
        if self.steps is not None:
            check_int(self.steps, "interval_steps", low=1)
        if self.seconds is not None:
            check_number(self.seconds, "interval_s", low=1e-3, high=MAX_SECONDS)
        check_int(self.warmup_steps, "warmup_steps")
        check_number(self.long_after_s, "long_after_s", low=0, high=MAX_SECONDS)
        check_number(self.first_s, "first_s", low=1e-3, high=MAX_SECONDS)
        check_int(self.first_steps, "first_steps", low=1)
        check_number(self.steady_s, "steady_s", low=1e-3, high=MAX_SECONDS)

    def bounds(self, k: int) -> tuple[int | None, float | None]:
        """The ``k``-th interval's (steps, seconds) after the warm-up (from 0): it ends at whichever
        comes first; None: no bound of that kind."""
        if self.steps is not None or self.seconds is not None:
            return self.steps, self.seconds
        grown = self.first_s * 2 ** min(k, 64)
        if grown >= self.steady_s:
            return None, self.steady_s
        return self.first_steps * 2**k, grown


def intervals_from(
    enabled: bool | Intervals | None,
    steps: int | None,
    seconds: float | None,
    warmup_steps: int = WARMUP_STEPS,
) -> Intervals | None:
    """The plan an adapter's arguments ask for: ``enabled`` False: none; True, or a length given:
    every epoch; None and no length: long epochs only (the default); an ``Intervals``: that plan."""
    if isinstance(enabled, Intervals):
        return enabled
    if enabled is not None and not isinstance(enabled, bool):
        plan = "True, False, None (long epochs only) or a perfkit.stages.Intervals"
        raise TypeError(f"intervals must be {plan}, got {enabled!r}")
    if enabled is False:
        return None
    given = steps is not None or seconds is not None
    return Intervals(steps, seconds, warmup_steps, always=bool(enabled) or given)


class Cuts:
    """Where the open epoch of one stage is in its intervals (the recorder keeps one per epoch)."""

    def __init__(self, plan: Intervals, registry: Registry, now: int, long: bool) -> None:
        self.plan = plan
        self.registry = registry
        self.window = Segments(registry)
        self.begun_ns = now
        self.on = plan.always or long  # cutting; else dormant until the epoch proves long
        self.expected: int | None = None  # the epoch's steps, where the driver knows them
        self.first_step = 0
        self.first_ns = now
        self.samples_at: int | None = 0
        self.nested_at = 0.0
        self.warm = plan.warmup_steps > 0
        self.count = 0  # intervals cut so far (the warm-up not counted)
        self.next_step = plan.warmup_steps if self.warm else self._steps_after(0)
        self.next_ns = self._ns_after(now) if not self.warm else None

    def due(self, steps: int, now: int) -> bool:
        """Whether the step just ended (``steps`` done) ends an interval (or the warm-up)."""
        if self.warm:
            return self.next_step is not None and steps >= self.next_step
        reached = (self.next_step is not None and steps >= self.next_step) or (
            self.next_ns is not None and now >= self.next_ns
        )
        if not self.on:
            if now - self.begun_ns < self.plan.long_after_s * 1e9 and not (
                reached and self._long(steps, now)
            ):
                return False
            self.on = True  # long: the steps since the warm-up are the first interval
            return True
        return reached

    def _long(self, steps: int, now: int) -> bool:
        """Whether the epoch, at the pace of its steps since the warm-up, will run past ``long_after_s``."""
        done = steps - self.first_step
        if self.expected is None or done <= 0:
            return False
        left_ns = (now - self.first_ns) / done * max(0, self.expected - steps)
        return now - self.begun_ns + left_ns >= self.plan.long_after_s * 1e9

    def advance(self, steps: int, now: int) -> str:
        """The cut is made after ``steps`` steps: its scope (``warmup`` or ``interval``); the next is set."""
        scope = "warmup" if self.warm else "interval"
        self.warm = False
        self.count += scope == "interval"
        self.first_step, self.first_ns = steps, now
        self.next_step = self._steps_after(steps)
        self.next_ns = self._ns_after(now)
        self.window = Segments(self.registry)
        return scope

    def trailing(self, steps: int) -> bool:
        """Whether the epoch, ending after ``steps`` steps, is cut once more: the steps since the last
        cut are its last interval. Only in an epoch already cut into intervals (one never cut is its
        epoch window alone, as before intervals existed; the warm-up is no interval): without this
        last cut its timeline stopped at the last cut, and the steps after it (up to a whole
        interval, a minute by default) were in no interval at all."""
        return self.count > 0 and steps > self.first_step

    def _steps_after(self, steps: int) -> int | None:
        every = self.plan.bounds(self.count)[0]
        return None if every is None else steps + every

    def _ns_after(self, now: int) -> int | None:
        every = self.plan.bounds(self.count)[1]
        return None if every is None else now + int(every * 1e9)
