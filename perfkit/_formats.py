"""The version of each file format perfkit writes and reads back: one number per format, here.

A writer puts its format's number under ``"format"``. A change that a reader of the current
number would misread (a key renamed, removed or given another meaning) bumps the number; a key
added is no change, as readers pass over keys they do not know. A reader that meets a number it
does not read refuses the file whole, in one line naming the file, its number and the number this
perfkit reads (``FormatError``, a ``ValueError``: ``perfkit`` prints it and exits 2). Data with no
number is not perfkit's: a reader lists it with the other broken files.

    >>> try:
    ...     check_format("runs/a/run.json", {"format": 3}, RUN_FORMAT)
    ... except FormatError as exc:
    ...     print(exc)
    runs/a/run.json is format 3; this perfkit reads format 2 (a newer perfkit wrote it: upgrade perfkit)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

RUN_FORMAT = 2
"""A run directory (``perfkit.run.RunWriter``): ``run.json``, which carries the number, and the
lines of ``windows.jsonl``, ``intervals.jsonl``, ``traces.jsonl`` and ``trials.jsonl``."""

SNAPSHOT_FORMAT = 1
"""A ``Snapshot``'s JSON (``Snapshot.to_dict``): a run directory's ``windows/*.json`` and ``final.json``."""

ANALYSIS_FORMAT = 1
"""A ``perfkit.trace.TraceAnalysis``'s JSON (``to_dict``): a ``traces.jsonl`` line's ``summary`` and
``perfkit analyze --json``. Analyses were numbered from 1 on: one written before carries no
number and has the fields of 1."""

DIAGNOSIS_FORMAT = 1
"""A ``perfkit.findings.Diagnosis``'s JSON (``to_dict``): ``verdicts.json`` and ``perfkit summary --json``."""


class FormatError(ValueError):
    """A file in a format this perfkit does not read: refused whole rather than misread."""


def check_format(where: str, data: Mapping[str, Any], version: int, *, unnumbered: int | None = None) -> None:
    """Refuse ``data`` (read from ``where``) unless its ``"format"`` is ``version``: another number is a
    ``FormatError``; no number at all (``unnumbered`` None) is a plain ``ValueError``, data that is not
    perfkit's (a reader lists it with the other broken files). ``unnumbered``: the format of data
    written before its format was numbered."""
    found = data.get("format", unnumbered)
    if type(found) is not int:  # a bool is no format number
        raise ValueError(f"{where} is not perfkit's: no format number (format={found!r})")
    if found != version:
        newer = " (a newer perfkit wrote it: upgrade perfkit)" if found > version else ""
        raise FormatError(f"{where} is format {found}; this perfkit reads format {version}{newer}")
