"""A run directory: everything a run measured, per stage epoch, for ``perfkit report`` to read later.

    RUN_DIR/
      run.json            format, perfkit version, start time, free-form metadata
      windows.jsonl       one line per stage epoch: stage, epoch, metric prefix, metrics, wall time,
                          samples, account, ranks, slowest steps, and where its snapshot is
      windows/*.json      the snapshot of each of those windows (Snapshot.to_dict)
      traces.jsonl        one line per profiler window: its trace file and its analysis
      final.json          the snapshot of the whole run, written when the run ends

Lines are appended as the run goes, so a run killed mid-epoch leaves everything up to its
last complete window. A write that fails (permissions, a full disk) is warned about once
per kind and never raises into the training loop. A ``RunWriter`` is a sink: give it to
``perfkit.window(sinks=...)`` or a monitor's ``sinks=`` like any other.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .._snapshot import Snapshot
from .._warn import WarnOnce
from ..stages import StageWindow

FORMAT = 2
"""1: lines named the stage ``phase`` and carried no prefix or account (still read)."""

_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def file_stem(name: str) -> str:
    """A name from the user (a stage) as a file name that stays in its folder.

    >>> file_stem("val"), file_stem("../../x")
    ('val', '______x')
    """
    return _UNSAFE.sub("_", name)[:80] or "_"


class RunWriter:
    """Appends a run's stage windows to the run directory ``path`` (created if missing).

    ``prefix`` is the metric prefix the windows' metrics carry (``perf``), stored with each line.
    """

    def __init__(
        self, path: str | os.PathLike[str], *, meta: Mapping[str, Any] | None = None, prefix: str = "perf"
    ) -> None:
        if not isinstance(path, (str, os.PathLike)):
            raise TypeError(f"path must be a str or os.PathLike, got {path!r}")
        if not isinstance(prefix, str) or not prefix:
            raise ValueError(f"prefix must be a non-empty str, got {prefix!r}")
        self.path = Path(path)
        self.prefix = prefix
        self._warn = WarnOnce()
        self._names: set[str] = set()
        self._safely("run.json", self._start, dict(meta or {}))

    def __repr__(self) -> str:
        return f"RunWriter({str(self.path)!r})"

    def _start(self, meta: dict[str, Any]) -> None:
        from .. import __version__

        (self.path / "windows").mkdir(parents=True, exist_ok=True)
        if (self.path / "run.json").exists():  # another writer of the same run (a second callback)
            return
        info = {"format": FORMAT, "perfkit": __version__, "started_unix": time.time(), "meta": meta}
        (self.path / "run.json").write_text(json.dumps(info, indent=2, default=str))

    def emit(self, window: StageWindow, metrics: Mapping[str, float], step: int) -> None:
        """As a sink: record ``window`` (see ``add_window``)."""
        self.add_window(window, metrics, step=step)

    def close(self) -> None:
        """As a sink: nothing to release (every line is written when its window ends)."""

    def add_window(
        self, window: StageWindow, metrics: Mapping[str, float], *, step: int | None = None
    ) -> None:
        """Record one stage epoch: its metrics and account on a line, its snapshot in its own file."""
        self._safely("window", self._add_window, window, metrics, step)

    def _add_window(self, window: StageWindow, metrics: Mapping[str, float], step: int | None) -> None:
        stem = f"{file_stem(window.stage)}_epoch{window.epoch}"
        name, k = stem, 2
        while name in self._names:  # several validation runs in one epoch
            name = f"{stem}_{k}"
            k += 1
        self._names.add(name)
        snapshot_file = f"windows/{name}.json"
        (self.path / snapshot_file).write_text(window.snapshot.to_json())
        line = {
            **window.to_dict(),
            "step": step,
            "prefix": self.prefix,
            "start_ns": window.snapshot.start_ns,
            "end_ns": window.snapshot.end_ns,
            "metrics": dict(metrics),
            "snapshot": snapshot_file,
        }
        self._append("windows.jsonl", line)

    def add_trace(
        self,
        *,
        stage: str,
        epoch: int,
        trace: str | os.PathLike[str],
        summary: Mapping[str, Any] | None,
        rank: int = 0,
    ) -> None:
        """Record one profiler window: where its trace is, and what its analysis found."""
        line = {"stage": stage, "epoch": epoch, "rank": rank, "trace": str(trace), "summary": summary}
        self._safely("trace", self._append, "traces.jsonl", line)

    def finish(self, snapshot: Snapshot) -> None:
        """Write the whole run's snapshot."""
        self._safely("final.json", lambda: (self.path / "final.json").write_text(snapshot.to_json()))

    def _append(self, file: str, line: Mapping[str, Any]) -> None:
        with open(self.path / file, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(line, default=str) + "\n")

    def _safely(self, what: str, fn: Any, *args: Any) -> None:
        try:
            fn(*args)
        except (OSError, TypeError, ValueError) as exc:
            self._warn(
                f"{what}:{type(exc).__name__}", f"perfkit: cannot write {what} in {self.path}: {exc!r}"
            )
