"""A run's diagnosis kept in its run directory (``verdicts.json``), for CI gates and later readers."""

from __future__ import annotations

import json
import os
from pathlib import Path

from .._warn import warn
from ..run import VERDICTS_FILE, read_run, write_atomically
from ._diagnose import diagnose
from ._verdict import Diagnosis


def write_diagnosis(run_dir: str | os.PathLike[str], *, job: str | None = None) -> Diagnosis | None:
    """Diagnose the run directory ``run_dir`` and write its ``verdicts.json`` (written whole, then
    renamed into place); None, with one warning, when the run cannot be read or the file written.
    ``job``: of a directory several jobs wrote, the one to diagnose (default the newest); a job
    beside another writes ``verdicts_JOB.json``, so neither replaces the other's."""
    path = Path(run_dir)
    try:
        run = read_run(path, job=job)
        diagnosis = diagnose(run)
        write_atomically(run.own_file(VERDICTS_FILE), json.dumps(diagnosis.to_dict(), indent=2))
    except (OSError, ValueError) as exc:  # the run's own data are on disk whatever happens here
        warn(f"perfkit: cannot write the diagnosis of {path}: {exc!r}")
        return None
    return diagnosis
