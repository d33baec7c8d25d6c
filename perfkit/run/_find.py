"""Run directories below a folder a user has at hand: ``lightning_logs/``, Hydra's ``outputs/``, an
HF Trainer's ``output_dir``, a ``runs/`` folder of scripts; and the one a path given on the command
line names (``locate_run``, ``readable_run``).

A run directory is a folder holding ``windows.jsonl``. The search goes breadth first, ``depth``
levels down (Hydra with a Lightning logger puts one at ``outputs/DATE/TIME/lightning_logs/
version_0/perfkit-run``: five), skips hidden folders and the inside of a run directory, never
follows a link to a folder (a link can loop), and stops after ``limit`` folders, so pointing it
at a home directory costs a bounded moment instead of a walk of the disk.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..names import RUN_DIR_NAME
from ._data import RunData
from ._files import read_object
from ._layout import RUN_FILE, WINDOWS_FILE
from ._reader import read_run

DEPTH = 5
LIMIT = 20_000
"""Folders looked at, at most, per search."""


def locate_run(path: str) -> tuple[Path, list[Path]]:
    """The run directory ``path`` names, and the other runs found with it, newest first.

    ``path`` itself, or its ``perfkit-run/`` folder (a logger's version directory, a Trainer's
    output directory); else, for a folder above runs (``lightning_logs/``, Hydra's ``outputs/``),
    the newest run directory below it (``find_runs``).

    >>> locate_run("no/such/dir")
    (PosixPath('no/such/dir'), [])
    """
    given = Path(path)
    if (given / WINDOWS_FILE).exists():
        return given, []
    if (given / RUN_DIR_NAME / WINDOWS_FILE).exists():
        return given / RUN_DIR_NAME, []
    if given.is_dir():
        runs = find_runs(given)
        if runs:
            return runs[0], runs[1:]
    return given, []


def readable_run(path: str, *, job: str | None = None) -> RunData:
    """The run directory at ``path`` (see ``locate_run``), refused (``ValueError``) when the reader
    found problems and not one window it could read: that is a broken run, not an empty one.
    ``job``: which of the jobs that wrote it (default the newest; see ``read_run``)."""
    run = read_run(locate_run(path)[0], job=job)
    if not run.windows and run.problems:
        raise ValueError(f"no window of {path} could be read: {run.problems[0]}")
    return run


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
            if (folder / WINDOWS_FILE).is_file():
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
    info = read_object(run_dir / RUN_FILE) or {}
    jobs = found if isinstance(found := info.get("jobs"), dict) else {}
    starts = [
        info.get("started_unix"),
        *(j.get("started_unix") for j in jobs.values() if isinstance(j, dict)),
    ]
    numbers = [float(s) for s in starts if isinstance(s, (int, float))]
    if numbers:
        return max(numbers)
    try:
        return (run_dir / WINDOWS_FILE).stat().st_mtime
    except OSError:
        return 0.0


def _newest_first(runs: list[Path]) -> list[Path]:
    return sorted(runs, key=started_unix, reverse=True)
