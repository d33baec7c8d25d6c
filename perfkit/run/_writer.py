"""A run directory: everything a run measured, per stage epoch, for ``perfkit report`` to read later.

    RUN_DIR/
      run.json            format (RUN_FORMAT), perfkit version, start time, metadata, jobs
      windows.jsonl       one line per stage epoch: stage, epoch, metric prefix, metrics, wall time,
                          samples, account, ranks, slowest steps, and where its snapshot is
      windows/*.json      the snapshot of each of those windows (Snapshot.to_dict)
      intervals.jsonl     one line per interval of a long stage epoch (no snapshot; bounded: _intervals)
      traces.jsonl        one line per profiler window: its trace file and its analysis
      trials.jsonl        one line per loader trial (``perfkit.trial``): each setting's batches/s
      final.json          the snapshot of the whole run, written when the run ends

Lines are appended as the run goes (and synced to disk when each window ends), so a run
killed mid-epoch leaves everything up to its last complete window. ``run.json``, the
snapshots and ``final.json`` are written to a temporary file and renamed: a full disk
never leaves one half-written. A line cut short is cut off before the next is appended.
A write that fails (permissions, a full disk) is warned about once per kind, in words
("no space left on device"), never raises into the training loop, and the windows it
lost are listed by the reader (each line is numbered, and ``run.json`` records them).
A ``RunWriter`` is a sink: give it to ``perfkit.window(sinks=...)`` or a monitor's
``sinks=`` like any other.

Several jobs may write one directory at once (two array jobs or a re-launched job given the
same ``run_dir``): each process is a *job* (``this_job()``: its pid and a random part), and a
second job writes beside the first under its own id rather than moving elsewhere, so the run
is where its config says. Every line carries its ``job``; ``run.json`` lists the jobs
(``jobs``: pid, host, start, their meta and the suffix of their own files, ``final_JOB.json``
for any job but the directory's first); a snapshot's file name is claimed with ``O_EXCL``,
temporary files are named per process, and lines are appended whole under an ``flock``. The
reader keeps the jobs apart (``read_run(path, job=...)``). Writers of one process (a trainer's
test after its fit) are one job.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import itertools
import json
import os
import re
import secrets
import socket
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from .._formats import RUN_FORMAT
from .._snapshot import Snapshot
from .._version import __version__
from .._warn import WarnOnce, log
from ..loaders import TrialResult
from ..names import display_name
from ..stages import StageWindow
from ._intervals import MAX_INTERVALS, compact, dumps

_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
LOCK = ".lock"
"""The file whose ``flock`` serialises jobs' updates of ``run.json``."""
_JOB: tuple[int, str] | None = None


def this_job() -> str:
    """This process's job id, as the lines it writes carry it: its pid and a random part (a pid is
    reused, and two hosts sharing a file system have the same ones). A forked child gets its own.

    >>> this_job() == this_job() and this_job().startswith(f"{os.getpid()}-")
    True
    """
    global _JOB
    pid = os.getpid()
    if _JOB is None or _JOB[0] != pid:
        _JOB = (pid, f"{pid}-{secrets.token_hex(4)}")
    return _JOB[1]


def file_stem(name: str) -> str:
    """A name from the user (a stage) as a file name that stays in its folder.

    >>> file_stem("val"), file_stem("../../x")
    ('val', '______x')
    """
    return _UNSAFE.sub("_", name)[:80] or "_"


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
        self._safely("run.json", self._start, dict(meta or {}))

    def __repr__(self) -> str:
        return f"RunWriter({str(self.path)!r})"

    def _start(self, meta: dict[str, Any]) -> None:
        now = time.time()
        self._info = {"format": RUN_FORMAT, "perfkit": __version__, "started_unix": now, "meta": meta}
        (self.path / "windows").mkdir(parents=True, exist_ok=True)
        run_json = self.path / "run.json"
        with locked(self.path / LOCK):
            info = _read_object(run_json) or {**self._info, "jobs": {}}
            jobs = info.get("jobs")
            jobs = info["jobs"] = jobs if isinstance(jobs, dict) else {}
            first = not jobs
            entry = jobs.get(self.job)
            if isinstance(entry, dict) and isinstance(entry.get("suffix"), str):
                self._suffix = entry["suffix"]  # another writer of this process: a test after its fit
                return
            self._suffix = "" if first else f"_{file_stem(self.job)}"
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
        line = {
            **window.to_dict(),
            "step": step,
            "prefix": self.prefix,
            "start_ns": window.snapshot.start_ns,
            "end_ns": window.snapshot.end_ns,
            "metrics": dict(metrics),
            "merged": 1,
            "job": self.job,
        }
        self._intervals.append(line)
        file = self.path / f"intervals{self._suffix}.jsonl"
        if len(self._intervals) > MAX_INTERVALS:  # a quarter of the limit is freed each time
            self._intervals = compact(self._intervals, MAX_INTERVALS * 3 // 4)
            self._safely("intervals", write_atomically, file, dumps(self._intervals))
        else:
            self._safely("intervals", append_line, file, line)

    def close(self) -> None:
        """As a sink: nothing to release (every line is written when its window ends)."""

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
            (self.path / "windows").mkdir(parents=True, exist_ok=True)
            # Several validation runs in one epoch, a trainer's test after its fit, another job
            # writing this directory: a name is claimed (O_EXCL), never replaced, never shared.
            for k in itertools.count(1):
                name = stem if k == 1 else f"{stem}_{k}"
                if name in self._names:
                    continue
                self._names.add(name)
                with contextlib.suppress(FileExistsError):
                    write_atomically(self.path / "windows" / f"{name}.json", text, new=True)
                    break
            snapshot_file = f"windows/{name}.json"
            line = {
                **window.to_dict(),
                "step": step,
                "prefix": self.prefix,
                "start_ns": window.snapshot.start_ns,
                "end_ns": window.snapshot.end_ns,
                "metrics": dict(metrics),
                "snapshot": snapshot_file,
                "seq": seq,
                "writer": self._id,
                "job": self.job,
            }
            append_line(self.path / "windows.jsonl", line, sync=True)
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
        if self._safely("trace", append_line, self.path / "traces.jsonl", line):
            self._save_lost()

    def add_trial(self, result: TrialResult) -> None:
        """Record a loader trial (``perfkit.trial(run=...)``), where a verdict's gain is read from."""
        line = {**result.to_dict(), "job": self.job}
        if self._safely("trial", append_line, self.path / "trials.jsonl", line):
            self._save_lost()

    def finish(self, snapshot: Snapshot) -> None:
        """Write the whole run's snapshot (``final.json``; ``final_JOB.json`` for a job beside another)."""
        name = f"final{self._suffix}.json"
        self._safely(name, write_atomically, self.path / name, snapshot.to_json())
        self._save_lost()

    def _save_lost(self) -> None:
        """Record in ``run.json`` the windows lost since the last time it could be written."""
        if len(self.lost) == self._lost_saved:
            return
        run_json = self.path / "run.json"
        if self._safely("run.json", self._record_lost, run_json):
            self._lost_saved = len(self.lost)

    def _record_lost(self, run_json: Path) -> None:
        with locked(self.path / LOCK):  # another job may be recording its own
            info = _read_object(run_json) or dict(self._info)
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


def describe_os_error(exc: OSError) -> str:
    """An OS error in the words a user acts on (``no space left on device``), with the file."""
    words = {
        errno.ENOSPC: "no space left on device",
        errno.EDQUOT: "disk quota exceeded",
        errno.EACCES: "permission denied",
        errno.EPERM: "permission denied",
        errno.EROFS: "read-only file system",
        errno.EFBIG: "file too large",
    }.get(exc.errno or 0, exc.strerror or type(exc).__name__)
    return f"{words} ({exc.filename})" if exc.filename else words


def write_atomically(path: Path, text: str, *, new: bool = False) -> None:
    """Write ``path`` through a temporary file and a rename: a full disk leaves the old file whole.

    The temporary name is this process's own (pid and a random part), so two writers of one
    file never write into each other's. ``new``: claim the name first (``O_EXCL``), raising
    ``FileExistsError`` when another writer has it, so a file is never replaced.
    """
    tmp = path.with_name(f"{path.name}.{os.getpid()}-{secrets.token_hex(4)}.tmp")
    if new:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
    try:
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        if new:  # the claimed name, left empty: free it for the next window
            with contextlib.suppress(OSError):
                path.unlink()
        raise


@contextlib.contextmanager
def locked(file: Path) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``file`` (created if missing) for the block; where the file
    system has no locks, the block runs unlocked (the writes are still whole)."""
    fd = os.open(file, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        with contextlib.suppress(OSError):
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def _read_object(file: Path) -> dict[str, Any] | None:
    try:
        info = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return info if isinstance(info, dict) else None


def append_line(path: Path, line: Mapping[str, Any], *, sync: bool = False) -> None:
    """Append ``line`` as one JSON line. A torn last line (a write cut short by a full disk or a
    kill) is cut off first, so the new line never glues to it; a write that fails is undone."""
    data = (json.dumps(line, default=str) + "\n").encode("utf-8")
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        with contextlib.suppress(OSError):  # another job appending: one line at a time, whole
            fcntl.flock(fd, fcntl.LOCK_EX)
        size = _untorn(fd)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            if sync:
                os.fsync(fd)
        except OSError:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, size)  # shrinking needs no space: the file ends on a whole line
            raise
    finally:
        os.close(fd)


def _untorn(fd: int) -> int:
    """Cut the file open on ``fd`` back to its last newline; returns its size."""
    size = os.fstat(fd).st_size
    if size == 0 or os.pread(fd, 1, size - 1) == b"\n":
        return size
    end = size
    while end > 0:
        start = max(0, end - 65536)
        chunk = os.pread(fd, end - start, start)
        cut = chunk.rfind(b"\n")
        if cut >= 0:
            os.ftruncate(fd, start + cut + 1)
            return start + cut + 1
        end = start
    os.ftruncate(fd, 0)
    return 0
