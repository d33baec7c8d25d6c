"""A run directory: everything a run measured, per window, for ``perfkit report`` to read later.

    RUN_DIR/
      run.json            format, perfkit version, start time, free-form metadata
      windows.jsonl       one line per phase epoch: metrics, wall time, samples, slowest steps
      windows/*.json      the snapshot of each of those windows (Snapshot.to_dict)
      traces.jsonl        one line per profiler window: its trace file and its analysis
      final.json          the snapshot of the whole run, written when the run ends

Lines are appended as the run goes, so a run killed mid-epoch leaves everything
up to its last complete window. A write that fails (permissions, a full disk)
is warned about once per kind and never raises into the training loop.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ._phases import PhaseWindow
from ._snapshot import Snapshot
from ._warn import WarnOnce

FORMAT = 1


class RunWriter:
    """Appends a run's windows to ``path`` (created if missing)."""

    def __init__(self, path: str | os.PathLike[str], *, meta: Mapping[str, Any] | None = None) -> None:
        self.path = Path(path)
        self._warn = WarnOnce()
        self._names: set[str] = set()
        self._safely("run.json", self._start, dict(meta or {}))

    def _start(self, meta: dict[str, Any]) -> None:
        from . import __version__

        (self.path / "windows").mkdir(parents=True, exist_ok=True)
        if (self.path / "run.json").exists():  # another writer of the same run (a second callback)
            return
        info = {"format": FORMAT, "perfkit": __version__, "started_unix": time.time(), "meta": meta}
        (self.path / "run.json").write_text(json.dumps(info, indent=2, default=str))

    def add_window(
        self, window: PhaseWindow, metrics: Mapping[str, float], *, step: int | None = None
    ) -> None:
        """Record one phase epoch: its metrics on a line, its snapshot in its own file."""
        self._safely("window", self._add_window, window, metrics, step)

    def _add_window(self, window: PhaseWindow, metrics: Mapping[str, float], step: int | None) -> None:
        name = f"{window.phase}_epoch{window.epoch}"
        k = 2
        while name in self._names:  # several validation runs in one epoch
            name = f"{window.phase}_epoch{window.epoch}_{k}"
            k += 1
        self._names.add(name)
        snapshot_file = f"windows/{name}.json"
        (self.path / snapshot_file).write_text(window.snapshot.to_json())
        line = {
            "phase": window.phase,
            "epoch": window.epoch,
            "step": step,
            "wall_s": window.wall_s,
            "samples": window.samples,
            "ranks": max(1, len(window.rank_step_means_s)),
            "start_ns": window.snapshot.start_ns,
            "end_ns": window.snapshot.end_ns,
            "metrics": dict(metrics),
            "slowest": [asdict(s) for s in window.slowest],
            "snapshot": snapshot_file,
        }
        self._append("windows.jsonl", line)

    def add_trace(
        self,
        *,
        phase: str,
        epoch: int,
        trace: str | os.PathLike[str],
        summary: Mapping[str, Any] | None,
        rank: int = 0,
    ) -> None:
        """Record one profiler window: where its trace is, and what its analysis found."""
        line = {"phase": phase, "epoch": epoch, "rank": rank, "trace": str(trace), "summary": summary}
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
