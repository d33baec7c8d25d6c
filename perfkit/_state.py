"""The process-wide on/off switch, and the tracer that profiler windows plug in.

Every entry point reads ``SWITCH.on`` when it is *called*, not when it is
decorated, so ``@timed`` applied at import time follows a later ``disable()``.
``PERFKIT_DISABLED=1`` in the environment starts the process switched off.

``SWITCH.tracer`` is None except while a profiler window records: then
``@timed`` functions and sections also open a named range on it (a
``torch.profiler.record_function``), so they show in the trace under their own
names. Outside windows this costs one attribute read per call.
"""

from __future__ import annotations

from typing import Protocol

from ._accel import SPEEDUPS, configure, env_flag


class Tracer(Protocol):
    """Opens and closes named ranges in a profiler's trace."""

    def begin(self, name: str) -> object: ...
    def end(self, handle: object) -> None: ...


class _Switch:
    """The switch of the pure-Python path (the compiled one reads a C struct with these fields)."""

    __slots__ = ("on", "tracer")

    def __init__(self, on: bool) -> None:
        self.on = on
        self.tracer: Tracer | None = None


SWITCH: _Switch = (SPEEDUPS.Switch if SPEEDUPS is not None else _Switch)(on=not env_flag("PERFKIT_DISABLED"))
configure(switch=SWITCH)


def enable() -> None:
    """Turn recording on for every entry point in this process.

    >>> import perfkit
    >>> perfkit.enable(); perfkit.is_enabled()
    True
    """
    SWITCH.on = True


def disable() -> None:
    """Turn recording off: entry points become thin pass-throughs that record nothing.

    >>> import perfkit
    >>> perfkit.disable(); perfkit.is_enabled()
    False
    >>> perfkit.enable()
    """
    SWITCH.on = False


def is_enabled() -> bool:
    """Whether entry points record (``PERFKIT_DISABLED=1`` makes this start ``False``)."""
    return SWITCH.on


def set_tracer(tracer: Tracer | None) -> Tracer | None:
    """Make entry points open ranges on ``tracer`` (None: stop); returns the previous one."""
    previous, SWITCH.tracer = SWITCH.tracer, tracer
    return previous
