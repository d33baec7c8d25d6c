"""Run directories below a folder a user has at hand: ``lightning_logs/``, Hydra's ``outputs/``, an
HF Trainer's ``output_dir``, a ``runs/`` folder of scripts.

A run directory is a folder holding ``windows.jsonl``. The search goes breadth first, ``depth``
levels down (Hydra with a Lightning logger puts one at ``outputs/DATE/TIME/lightning_logs/
version_0/perfkit-run``: five), skips hidden folders and the inside of a run directory, never
follows a link to a folder (a link can loop), and stops after ``limit`` folders, so pointing it
at a home directory costs a bounded moment instead of a walk of the disk.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

DEPTH = 5
LIMIT = 20_000
"""Folders looked at, at most, per search."""


def find_runs(path: str | os.PathLike[str], *, depth: int = DEPTH, limit: int = LIMIT) -> list[Path]:
    """The run directories at or below ``path``, newest first (by the start of their last job).

    >>> find_runs("no/such/dir")
    []
    """
    found: list[Path] = []
    level, seen = [Path(path)], 0
    for _ in range(depth + 1):
        below: list[Path] = []
        for folder in level:
            if (folder / "windows.jsonl").is_file():
                found.append(folder)
                continue
            seen += 1
            if seen > limit:
                return _newest_first(found)
            below += _subfolders(folder)
        level = below
    return _newest_first(found)


def _subfolders(folder: Path) -> list[Path]:
    try:
        with os.scandir(folder) as entries:
            return sorted(
                Path(e.path)
                for e in entries
                if not e.name.startswith(".") and e.is_dir(follow_symlinks=False)
            )
    except OSError:  # unreadable, or gone since it was listed
        return []


def started_unix(run_dir: Path) -> float:
    """When the run at ``run_dir`` last started: the latest start in ``run.json`` (its first job's, or
    a later job's that wrote beside it), else the time ``windows.jsonl`` was last written."""
    try:
        info = json.loads((run_dir / "run.json").read_text(encoding="utf-8"))
        jobs = info.get("jobs") if isinstance(info.get("jobs"), dict) else {}
        starts = [
            info.get("started_unix"),
            *(j.get("started_unix") for j in jobs.values() if isinstance(j, dict)),
        ]
        numbers = [float(s) for s in starts if isinstance(s, (int, float))]
        if numbers:
            return max(numbers)
    except (OSError, ValueError, AttributeError):
        pass
    try:
        return (run_dir / "windows.jsonl").stat().st_mtime
    except OSError:
        return 0.0


def _newest_first(runs: list[Path]) -> list[Path]:
    return sorted(runs, key=started_unix, reverse=True)
