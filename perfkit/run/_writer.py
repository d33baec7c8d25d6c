"""``RunWriter``: a run's stage windows written to its run directory as the run goes, for ``perfkit
report`` to read later (the files: ``_layout``).

Lines are appended as the run goes (and synced to disk when each window ends), so a run
killed mid-epoch leaves everything up to its last complete window. ``run.json``, the
snapshots and ``final.json`` are written to a temporary file and renamed: a full disk
never leaves one half-written. A line cut short is cut off before the next is appended
(``_files``). A write that fails (permissions, a full disk) is warned about once per kind, in
words ("no space left on device"), never raises into the training loop, and the windows it
lost are listed by the reader (each line is numbered, and ``run.json`` records them).
A ``RunWriter`` is a sink: give it to ``perfkit.window(sinks=...)`` or a monitor's
``sinks=`` like any other.

Several jobs may write one directory at once (two array jobs or a re-launched job given the
same ``run_dir``: ``_jobs``, ``_layout``): a second job writes beside the first under its own id
rather than moving elsewhere, so the run is where its config says. A snapshot's file name is
claimed with ``O_EXCL``, temporary files are named per process, and lines are appended whole
under an ``flock``. Writers of one process (a trainer's test after its fit) are one job.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import socket
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .._display import display_name
from .._formats import RUN_FORMAT
from .._snapshot import Snapshot
from .._version import __version__
from .._warn import WarnOnce, log
from ..loaders import TrialResult
from ..stages import StageWindow
from ._files import append_line, describe_os_error, locked, read_object, write_atomically
from ._intervals import MAX_INTERVALS, compact, dumps
from ._jobs import this_job
from ._layout import (
    FINAL_FILE,
    INTERVALS_FILE,
    LOCK_FILE,
    RUN_FILE,
    SNAPSHOTS_DIR,
    TRACES_FILE,
    TRIALS_FILE,
    WINDOWS_FILE,
    file_stem,
    job_suffix,
    own,
    snapshot_file,
)


class RunWriter:
    """Appends a run's stage windows to the run directory ``path`` (created if missing).

    ``prefix`` is the metric prefix the windows' metrics carry (``perf``), stored with each line.
    A window that cannot be written (a full disk) is warned about, counted in ``lost`` and
    recorded in ``run.json`` as soon as a write succeeds again, so the reader lists it.
    """

    def __init__(
        self, path: str | os.PathLike[str], *, meta: Mapping[str, Any] | None = None, prefix: str = "perf"
    ) -> None:
        if not isinstance(path, (str, os.PathLike)):
            raise TypeError(f"path must be a str or os.PathLike, got {path!r}")
        if not isinstance(prefix, str) or not prefix:
            raise ValueError(f"prefix must be a non-empty str, got {prefix!r}")
        if meta is not None and not isinstance(meta, Mapping):
            raise TypeError(f"meta must be a mapping or None, got {meta!r}")
        self.path = Path(path)
        self.prefix = prefix
        self._warn = WarnOnce()
        self._names: set[str] = set()
        self.job = this_job()
        """The job this writer's lines belong to (``this_job()``: every writer of this process)."""
        self._id = f"{os.getpid()}-{next(_WRITERS)}"  # numbers windows apart from another writer's
        self._suffix = ""  # of this job's own files (final.json): "" for the directory's first job
        self._seq = 0
        self.lost: list[dict[str, Any]] = []
        """Windows that could not be written: writer, seq, stage, epoch and the reason."""
        self._lost_saved = 0
        self._intervals: list[dict[str, Any]] = []  # this job's interval lines, as the file holds them
        self._info: dict[str, Any] = {}
        self._safely(RUN_FILE, self._start, dict(meta or {}))

    def __repr__(self) -> str:
        return f"RunWriter({str(self.path)!r})"

    def _start(self, meta: dict[str, Any]) -> None:
        now = time.time()
        self._info = {"format": RUN_FORMAT, "perfkit": __version__, "started_unix": now, "meta": meta}
        (self.path / SNAPSHOTS_DIR).mkdir(parents=True, exist_ok=True)
        run_json = self.path / RUN_FILE
        with locked(self.path / LOCK_FILE):
            info = read_object(run_json) or {**self._info, "jobs": {}}
            jobs = info.get("jobs")
            jobs = info["jobs"] = jobs if isinstance(jobs, dict) else {}
            first = not jobs
            entry = jobs.get(self.job)
            if isinstance(entry, dict) and isinstance(entry.get("suffix"), str):
                self._suffix = entry["suffix"]  # another writer of this process: a test after its fit
                return
            self._suffix = "" if first else job_suffix(self.job)
            jobs[self.job] = {
                "pid": os.getpid(),
                "host": socket.gethostname(),
                "started_unix": now,
                "meta": meta,
                "suffix": self._suffix,
            }
            write_atomically(run_json, json.dumps(info, indent=2, default=str))

    def emit(self, window: StageWindow, metrics: Mapping[str, float], step: int) -> None:
        """As a sink: record ``window`` (see ``add_window``; an interval: ``add_interval``)."""
        if window.is_interval:
            self.add_interval(window, metrics, step=step)
        else:
            self.add_window(window, metrics, step=step)

    def add_interval(
        self, window: StageWindow, metrics: Mapping[str, float], *, step: int | None = None
    ) -> None:
        """Record one interval of a stage epoch still running: a line of ``intervals.jsonl``, merged
        with its neighbours once the file holds ``MAX_INTERVALS`` (see ``perfkit.run._intervals``)."""
        line = {**self._line(window, metrics, step), "merged": 1, "job": self.job}
        self._intervals.append(line)
        file = self.path / own(INTERVALS_FILE, self._suffix)
        if len(self._intervals) > MAX_INTERVALS:  # a quarter of the limit is freed each time
            self._intervals = compact(self._intervals, MAX_INTERVALS * 3 // 4)
            self._safely("intervals", write_atomically, file, dumps(self._intervals))
        else:
            self._safely("intervals", append_line, file, line)

    def close(self) -> None:
        """As a sink: nothing to release (every line is written when its window ends)."""

    def _line(self, window: StageWindow, metrics: Mapping[str, float], step: int | None) -> dict[str, Any]:
        """What a line of ``windows.jsonl`` and of ``intervals.jsonl`` both hold."""
        snapshot = window.snapshot
        return {
            **window.to_dict(),
            "step": step,
            "prefix": self.prefix,
            "start_ns": snapshot.start_ns,
            "end_ns": snapshot.end_ns,
            "metrics": dict(metrics),
        }

    def add_window(
        self, window: StageWindow, metrics: Mapping[str, float], *, step: int | None = None
    ) -> None:
        """Record one stage epoch: its metrics and account on a line, its snapshot in its own file."""
        seq = self._seq
        self._seq += 1
        if self._safely("window", self._add_window, window, metrics, step, seq):
            self._save_lost()

    def _add_window(
        self, window: StageWindow, metrics: Mapping[str, float], step: int | None, seq: int
    ) -> None:
        stem = f"{file_stem(window.stage)}_epoch{window.epoch}"
        text = window.snapshot.to_json()
        try:
            (self.path / SNAPSHOTS_DIR).mkdir(parents=True, exist_ok=True)
            # Several validation runs in one epoch, a trainer's test after its fit, another job
            # writing this directory: a name is claimed (O_EXCL), never replaced, never shared.
            for k in itertools.count(1):
                name = stem if k == 1 else f"{stem}_{k}"
                if name in self._names:
                    continue
                self._names.add(name)
                with contextlib.suppress(FileExistsError):
                    write_atomically(self.path / snapshot_file(name), text, new=True)
                    break
            line = {
                **self._line(window, metrics, step),
                "snapshot": snapshot_file(name),
                "seq": seq,
                "writer": self._id,
                "job": self.job,
            }
            append_line(self.path / WINDOWS_FILE, line, sync=True)
        except OSError as exc:
            reason = describe_os_error(exc)
            self.lost.append(
                {
                    "writer": self._id,
                    "job": self.job,
                    "seq": seq,
                    "stage": window.stage,
                    "epoch": window.epoch,
                    "reason": reason,
                }
            )
            # On the console with each lost window, not only in the once-per-kind warning.
            log.warning(
                "perfkit: %s epoch %s was not written to %s: %s",
                display_name(window.stage),
                window.epoch,
                self.path,
                reason,
            )
            raise

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
        line = {
            "stage": stage,
            "epoch": epoch,
            "rank": rank,
            "trace": str(trace),
            "summary": summary,
            "job": self.job,
        }
        if self._safely("trace", append_line, self.path / TRACES_FILE, line):
            self._save_lost()

    def add_trial(self, result: TrialResult) -> None:
        """Record a loader trial (``perfkit.trial(run=...)``), where a verdict's gain is read from."""
        line = {**result.to_dict(), "job": self.job}
        if self._safely("trial", append_line, self.path / TRIALS_FILE, line):
            self._save_lost()

    def finish(self, snapshot: Snapshot) -> None:
        """Write the whole run's snapshot (``final.json``; ``final_JOB.json`` for a job beside another)."""
        name = own(FINAL_FILE, self._suffix)
        self._safely(name, write_atomically, self.path / name, snapshot.to_json())
        self._save_lost()

    def _save_lost(self) -> None:
        """Record in ``run.json`` the windows lost since the last time it could be written."""
        if len(self.lost) == self._lost_saved:
            return
        run_json = self.path / RUN_FILE
        if self._safely(RUN_FILE, self._record_lost, run_json):
            self._lost_saved = len(self.lost)

    def _record_lost(self, run_json: Path) -> None:
        with locked(self.path / LOCK_FILE):  # another job may be recording its own
            info = read_object(run_json) or dict(self._info)
            recorded = info.get("lost")
            known: list[Any] = recorded if isinstance(recorded, list) else []
            seen = {(x.get("writer"), x.get("seq")) for x in known if isinstance(x, dict)}
            info["lost"] = [*known, *(x for x in self.lost if (x["writer"], x["seq"]) not in seen)]
            write_atomically(run_json, json.dumps(info, indent=2, default=str))

    def _safely(self, what: str, fn: Any, *args: Any) -> bool:
        try:
            fn(*args)
        except (OSError, TypeError, ValueError) as exc:
            reason = describe_os_error(exc) if isinstance(exc, OSError) else repr(exc)
            self._warn(
                f"{what}:{type(exc).__name__}",
                f"perfkit: cannot write {what} in {self.path}: {reason}; the run goes on, and what is lost "
                "is listed in its report (said once per kind)",
            )
            return False
        return True


_WRITERS = itertools.count(1)
