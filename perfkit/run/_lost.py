"""The windows a run lost: numbered by their writer but never written, or recorded as lost.

A writer numbers each window it starts (``seq``, per writer) and records in ``run.json`` each one
it could not write (``lost``: a full disk) once a write succeeds again. The reader lists both
kinds in ``problems``, so a report says what is missing instead of reading a gap as nothing.

>>> problems = []
>>> lines = [("windows.jsonl line 1", {"writer": "41-1", "seq": 0}), ("line 2", {"writer": "41-1", "seq": 3})]
>>> missing_windows(lines, {}, problems, "")
>>> problems[0][:60]
'windows.jsonl: 2 window(s) missing (written as numbers 1-2 o'
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .._display import display_name
from ._jobs import job_of
from ._layout import WINDOWS_FILE


def missing_windows(
    lines: list[tuple[str, dict[str, Any]]], meta: Mapping[str, Any], problems: list[str], job: str
) -> None:
    """Windows the job's writers numbered but whose line is not there, and those recorded as lost."""
    seen: dict[str, set[int]] = {}
    for _, line in lines:
        seq, writer = line.get("seq"), line.get("writer")
        if (
            isinstance(seq, int)
            and not isinstance(seq, bool)
            and 0 <= seq < 10**9
            and isinstance(writer, str)
        ):
            seen.setdefault(writer, set()).add(seq)
    lost = meta.get("lost")
    told: set[tuple[str, int]] = set()
    for item in lost if isinstance(lost, list) else []:
        if isinstance(item, dict) and job_of(item) == job:
            told.add((str(item.get("writer")), item.get("seq", -1)))
            stage, epoch, reason = (display_name(item.get(k, "?")) for k in ("stage", "epoch", "reason"))
            problems.append(f"{stage} epoch {epoch}: not written ({reason})")
    for writer, seqs in seen.items():
        gaps = [n for n in range(max(seqs) + 1) if n not in seqs and (writer, n) not in told]
        if gaps:
            problems.append(
                f"{WINDOWS_FILE}: {len(gaps)} window(s) missing (written as numbers {_ranges(gaps)} of "
                "the run, never completed: a full disk, or a line skipped above)"
            )


def _ranges(numbers: list[int]) -> str:
    parts, start = [], numbers[0]
    for a, b in zip(numbers, [*numbers[1:], None], strict=True):
        if b != a + 1:
            parts.append(str(a) if a == start else f"{start}-{a}")
            if b is not None:
                start = b
    return ", ".join(parts)
