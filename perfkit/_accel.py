"""Which hot path runs: the compiled one (``perfkit/_speedups.c``) or pure Python.

perfkit builds ``_speedups`` at install time where a C compiler is present; without one the
install still succeeds and every entry point runs in pure Python. ``PERFKIT_PURE=1`` in the
environment forces pure Python where the extension is built (the test suite runs both ways).

Both paths record the same records: the compiled entry points take only the common case and hand
every other call, before doing anything, to the Python code of the same entry point (see the
C file's header). ``perfkit --version`` says which path is active, and why.
"""

from __future__ import annotations

import os
from types import ModuleType

_FALSE_WORDS = frozenset({"", "0", "false", "no", "off"})


def env_flag(name: str) -> bool:
    """Whether environment variable ``name`` is set to something other than empty, 0, false, no, off."""
    return os.environ.get(name, "").strip().lower() not in _FALSE_WORDS


PURE_REQUESTED = env_flag("PERFKIT_PURE")
"""``PERFKIT_PURE`` is set: the compiled hot path is not used even where it is built."""


def _load() -> tuple[ModuleType | None, str]:
    if PURE_REQUESTED:
        return None, "pure Python (PERFKIT_PURE is set)"
    try:
        from . import _speedups
    except ImportError:
        return None, "pure Python (the compiled extension is not built: no C compiler at install time?)"
    return _speedups, "compiled (perfkit._speedups)"


SPEEDUPS, HOT_PATH = _load()
"""The compiled module, or None; and the words ``perfkit --version`` uses for the active path."""


def configure(**objects: object) -> None:
    """Hand the compiled module the objects its fast paths read: each module of the hot path gives
    its own (the switch, the context variables, the Python fallbacks). A no-op on the pure path."""
    if SPEEDUPS is not None:
        SPEEDUPS.configure(**objects)


def hot_path() -> str:
    """Which hot path records here, and why: the compiled one (built at install where a C compiler
    was present), or pure Python (none was, or ``PERFKIT_PURE`` is set). Both record the same.

    >>> import perfkit
    >>> perfkit.hot_path().startswith(("compiled", "pure Python"))
    True
    """
    return HOT_PATH
