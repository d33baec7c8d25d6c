"""Interval windows: an answer while a long stage epoch is still running.

A stage epoch is one window; a long one (LLM training on ``max_steps`` over one pass, an
ImageNet epoch of an hour) would give its first numbers when it ends. ``Intervals`` tells a
``StageRecorder`` to also cut the open epoch into windows every ``steps`` steps or ``seconds``
seconds, without closing it (the epoch's own window stays exact over the whole epoch). The
first ``warmup_steps`` steps are cut first as a window of their own (scope ``warmup``):
compilation, worker start-up and cache fill make them unlike the rest, so they are reported
apart and the first interval starts after them.

Left to itself (``always=False``, the default) the recorder cuts only epochs that are long: a
stage the driver marks long (a step-based loop: ``max_steps``, a loader without a length), or
an epoch still running after ``long_after_s``. A run of short epochs gets exactly what it got
before intervals existed.

    >>> plan = Intervals(steps=100)
    >>> plan.steps, plan.seconds, plan.warmup_steps
    (100, None, 10)
"""

from __future__ import annotations

from dataclasses import dataclass

from .._registry import Registry
from .._validate import check_int, check_number
from ._segments import Segments

DEFAULT_S = 60.0
"""An interval's length when none is given: a minute, the answer a user debugging a pipeline waits for."""
LONG_AFTER_S = 180.0
"""An epoch still running after three minutes is long: its intervals begin."""
WARMUP_STEPS = 10
"""Steps left out as warm-up at the start of each epoch (the loader's first batch, compilation)."""
MAX_SECONDS = 7 * 86400.0


@dataclass(frozen=True)
class Intervals:
    """When a stage epoch is cut into interval windows (see the module docstring).

    ``steps`` / ``seconds``: an interval ends after this many steps or seconds, whichever comes
    first (neither: every ``DEFAULT_S`` seconds). ``always``: cut every epoch, not only long ones.
    """

    steps: int | None = None
    seconds: float | None = None
    warmup_steps: int = WARMUP_STEPS
    always: bool = False
    long_after_s: float = LONG_AFTER_S

    def __post_init__(self) -> None:
        if self.steps is not None:
            check_int(self.steps, "interval_steps", low=1)
        if self.seconds is not None:
            check_number(self.seconds, "interval_s", low=1e-3, high=MAX_SECONDS)
        check_int(self.warmup_steps, "warmup_steps")
        check_number(self.long_after_s, "long_after_s", low=0, high=MAX_SECONDS)

    @property
    def every_ns(self) -> int | None:
        """An interval's length in ns (None: by steps only)."""
        if self.seconds is None and self.steps is None:
            return int(DEFAULT_S * 1e9)
        return None if self.seconds is None else int(self.seconds * 1e9)


def intervals_from(
    enabled: bool | None, steps: int | None, seconds: float | None, warmup_steps: int = WARMUP_STEPS
) -> Intervals | None:
    """The plan an adapter's arguments ask for: ``enabled`` False: none; True, or a length given:
    every epoch; None and no length: long epochs only (the default)."""
    if enabled is not None and not isinstance(enabled, bool):
        raise TypeError(f"intervals must be True, False or None (long epochs only), got {enabled!r}")
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
        self.first_step = 0
        self.samples_at: int | None = 0
        self.nested_at = 0.0
        self.warm = plan.warmup_steps > 0
        self.next_step = plan.warmup_steps if self.warm else self._steps_after(0)
        self.next_ns = self._ns_after(now) if not self.warm else None
        self.count = 0  # intervals cut so far (the warm-up not counted)

    def due(self, steps: int, now: int) -> bool:
        """Whether the step just ended (``steps`` done) ends an interval (or the warm-up)."""
        if self.warm:
            return self.next_step is not None and steps >= self.next_step
        if not self.on:
            if now - self.begun_ns < self.plan.long_after_s * 1e9:
                return False
            self.on = True  # long: the steps since the warm-up are the first interval
            return True
        return (self.next_step is not None and steps >= self.next_step) or (
            self.next_ns is not None and now >= self.next_ns
        )

    def advance(self, steps: int, now: int) -> str:
        """The cut is made after ``steps`` steps: its scope (``warmup`` or ``interval``); the next is set."""
        scope = "warmup" if self.warm else "interval"
        self.warm = False
        self.count += scope == "interval"
        self.first_step = steps
        self.next_step = self._steps_after(steps)
        self.next_ns = self._ns_after(now)
        self.window = Segments(self.registry)
        return scope

    def _steps_after(self, steps: int) -> int | None:
        return None if self.plan.steps is None else steps + self.plan.steps

    def _ns_after(self, now: int) -> int | None:
        every = self.plan.every_ns
        return None if every is None else now + every
