"""Shortcuts on the current registry (the innermost ``use_registry``, else the default)."""

from __future__ import annotations

from ._registry import Cursor, current_registry
from ._snapshot import Snapshot


def snapshot(since: Cursor | None = None) -> Snapshot:
    """Statistics of the current registry since ``since`` (default: since its start or last reset).

    >>> import perfkit
    >>> start = perfkit.cursor()
    >>> with perfkit.section("step"):
    ...     pass
    >>> perfkit.snapshot(since=start)["step"].count
    1
    """
    return current_registry().snapshot(since)


def cursor() -> Cursor:
    """Mark the current point of the current registry, to open a window (a stage epoch, say)."""
    return current_registry().cursor()


def reset() -> None:
    """Forget every record of the current registry."""
    current_registry().reset()
