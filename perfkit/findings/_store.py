"""A run's diagnosis kept in its run directory (``verdicts.json``), for CI gates and later readers."""

from __future__ import annotations

import json
import os
from pathlib import Path

from .._warn import warn
from ..run import read_run
from ._diagnose import diagnose
from ._verdict import Diagnosis

FILE = "verdicts.json"


def write_diagnosis(run_dir: str | os.PathLike[str]) -> Diagnosis | None:
    """Diagnose the run directory ``run_dir`` and write its ``verdicts.json`` (written whole, then
    renamed into place); None, with one warning, when the run cannot be read or the file written."""
    path = Path(run_dir)
    try:
        diagnosis = diagnose(read_run(path))
        tmp = path / (FILE + ".tmp")
        tmp.write_text(json.dumps(diagnosis.to_dict(), indent=2), encoding="utf-8")
        os.replace(tmp, path / FILE)
    except (OSError, ValueError) as exc:  # the run's own data are on disk whatever happens here
        warn(f"perfkit: cannot write the diagnosis of {path}: {exc!r}")
        return None
    return diagnosis
