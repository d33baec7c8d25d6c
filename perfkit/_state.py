"""The process-wide on/off switch.

Every entry point reads ``SWITCH.on`` when it is *called*, not when it is
decorated, so ``@timed`` applied at import time follows a later ``disable()``.
``PERFKIT_DISABLED=1`` in the environment starts the process switched off.
"""

from __future__ import annotations

import os

_FALSE_WORDS = frozenset({"", "0", "false", "no", "off"})


class _Switch:
    __slots__ = ("on",)

    def __init__(self, on: bool) -> None:
        self.on = on


def _env_disabled() -> bool:
    return os.environ.get("PERFKIT_DISABLED", "").strip().lower() not in _FALSE_WORDS


SWITCH = _Switch(on=not _env_disabled())


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
