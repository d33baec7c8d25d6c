"""The small words of trace text: the line prefix, part labels, step counts (numbers: ``perfkit._units``)."""

from __future__ import annotations

from collections.abc import Sequence

from ..._units import plural
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
