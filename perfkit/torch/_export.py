"""Writing and reading a profiler window's trace, off the training thread.

When a window ends, its recorded session goes to one background thread that
writes the Chrome trace, gzips it, checks it against the size cap and reads it
back with ``analyze_trace``. The training loop only hands it over.
A trace that cannot be written (permissions, a full disk) is a warning; the
analysis comes back through ``results()`` for the training thread to log and
announce (nothing is printed from the export thread).
"""

from __future__ import annotations

import gzip
import os
import queue
import shutil
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._warn import WarnOnce
from ..run import describe_os_error
from ..trace import TraceAnalysis, analyze_trace


@dataclass(frozen=True)
class TraceJob:
    """One window's trace: where it goes and how it is reported."""

    stage: str
    epoch: int
    rank: int
    path: Path
    compress: bool
    max_bytes: int
    top_k: int


class TraceExporter:
    """One background thread that exports, compresses and analyses traces, in order."""

    def __init__(self) -> None:
        self._pool: ThreadPoolExecutor | None = None
        self._done: queue.SimpleQueue[tuple[TraceJob, TraceAnalysis]] = queue.SimpleQueue()
        self._pending: list[Future[None]] = []
        self.warn = WarnOnce()

    def submit(self, session: Any, job: TraceJob) -> None:
        """Export ``session`` (a finished ``torch.autograd.profiler.profile``) as ``job`` says."""
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="perfkit-trace-export")
        self._pending = [f for f in self._pending if not f.done()]
        self._pending.append(self._pool.submit(self._export, session, job))

    def results(self) -> list[tuple[TraceJob, TraceAnalysis]]:
        """Analyses finished since the last call."""
        out = []
        while not self._done.empty():
            out.append(self._done.get())
        return out

    def close(self) -> None:
        """Wait for the exports under way (at the end of a run) and stop the thread."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None

    def _export(self, session: Any, job: TraceJob) -> None:
        stem = job.path.name.removesuffix(".gz").removesuffix(".json")
        raw = job.path.with_name(stem + ".tmp.json")
        try:
            job.path.parent.mkdir(parents=True, exist_ok=True)
            session.export_chrome_trace(str(raw))
            size = raw.stat().st_size
            if size > job.max_bytes:
                raw.unlink()
                self.warn(
                    "size",
                    f"perfkit: the trace of {job.stage} epoch {job.epoch} is {size / 1e6:.0f} MB, over "
                    f"the {job.max_bytes / 1e6:.0f} MB cap; not kept (try fewer profile_steps, or no shapes)",
                )
                return
            if job.compress:
                with open(raw, "rb") as src, gzip.open(job.path, "wb", compresslevel=6) as dst:
                    shutil.copyfileobj(src, dst)
                raw.unlink()
            else:
                os.replace(raw, job.path)
        except Exception as exc:  # a trace that cannot be written must not stop training
            why = (
                describe_os_error(exc) if isinstance(exc, OSError) else repr(exc)
            )  # "no space left on device"
            self.warn(f"write:{type(exc).__name__}", f"perfkit: cannot write trace {job.path}: {why}")
            raw.unlink(missing_ok=True)
            return
        self._analyse(job)

    def _analyse(self, job: TraceJob) -> None:
        try:
            analysis = analyze_trace(job.path, top_k=job.top_k)
        except Exception as exc:
            self.warn(f"analyse:{type(exc).__name__}", f"perfkit: cannot analyse trace {job.path}: {exc!r}")
            return
        self._done.put((job, analysis))
