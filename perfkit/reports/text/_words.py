"""The small words of trace text: the line prefix, part labels, durations, sizes."""

from __future__ import annotations

from collections.abc import Sequence

from ..._units import format_seconds, plural
from ...names import part_label
from ...trace import ALL_PARTS

PREFIX = "[Profiler]"
ROOM = len(PREFIX) + 3  # what a table row gives up to the prefix, its space and the table's indent
LABELS = {part: part_label(part) for part in ALL_PARTS}


def prefixed(lines: Sequence[str]) -> str:
    """``lines`` joined, each after ``PREFIX`` (so a log can be searched for them)."""
    return "\n".join(f"{PREFIX} {line}" for line in lines)


def steps_text(count: int) -> str:
    """``"1 step"``, ``"1,200 steps"``, ``"no steps"``."""
    return plural(count, "step") if count else "no steps"


def us(value: float) -> str:
    """µs as a readable duration: ``us(1500.0)`` -> ``"1.50 ms"``."""
    return format_seconds(value / 1e6)


def signed(value: float) -> str:
    """µs with its sign: ``signed(-20.0)`` -> ``"-20.0 µs"``."""
    return ("+" if value >= 0 else "-") + format_seconds(abs(value) / 1e6)


def bytes_text(n: float) -> str:
    """``12_300_000`` -> ``"12.3 MB"``."""
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(n) >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n:.0f} B"
