"""The jobs of a run directory: which process wrote which line, so two jobs are never read as one.

Two processes given the same run directory (two array jobs, a re-launched job) each write
under their own job id (``this_job()``), recorded on every line and in ``run.json``'s ``jobs``; a
line without one belongs to job ``""``. The reader reads one job at a time, by default the newest
that has finished a window, and says in ``problems`` which other jobs the directory holds.

>>> job_of({"job": "41-ab12", "writer": "41-1"}), job_of({})
('41-ab12', '')
"""

from __future__ import annotations

import os
import secrets
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from .._display import display_name

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


@dataclass(frozen=True)
class RunJob:
    """One job (a process) that wrote the run directory: its id, where and when it ran, the windows
    it finished, and the suffix of its own files (``final{suffix}.json``; ``""`` for the first)."""

    id: str
    pid: int | None
    host: str | None
    started_unix: float | None
    windows: int
    suffix: str

    def to_dict(self) -> dict[str, Any]:
        """Every field but ``suffix`` (where its files are is the reader's business)."""
        return {k: v for k, v in asdict(self).items() if k != "suffix"}

    def describe(self) -> str:
        """The job in one line of words: ``job 4121-9f2c (pid 4121 on node3, started ..., 3 windows)``."""
        where = [f"pid {self.pid}" + (f" on {display_name(self.host, 40)}" if self.host else "")]
        if self.pid is None:
            where = ["not listed in run.json"]
        if self.started_unix is not None:
            where.append("started " + time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.started_unix)))
        where.append(f"{self.windows} window(s)")
        name = f"job {display_name(self.id, 40)}" if self.id else "the job with no id"
        return f"{name} ({', '.join(where)})"


def job_of(line: Mapping[str, Any]) -> str:
    """The job that wrote ``line`` (a line of ``windows.jsonl``, ``traces.jsonl`` or a lost window)."""
    job = line.get("job")
    return job if isinstance(job, str) else ""


def list_jobs(meta: Mapping[str, Any], lines: Sequence[Mapping[str, Any]]) -> list[RunJob]:
    """Every job of the directory, oldest first: those ``run.json`` lists (in the order they
    started), then any other a line names."""
    recorded = meta.get("jobs")
    recorded = recorded if isinstance(recorded, Mapping) else {}
    counts: dict[str, int] = {}
    for line in lines:
        job = job_of(line)
        counts[job] = counts.get(job, 0) + 1
    jobs = []
    for job in dict.fromkeys([*recorded, *counts]):
        entry = recorded.get(job)
        entry = entry if isinstance(entry, Mapping) else {}
        suffix = entry.get("suffix")
        jobs.append(
            RunJob(
                id=job,
                pid=_number(entry.get("pid"), int),
                host=entry.get("host") if isinstance(entry.get("host"), str) else None,
                started_unix=_number(entry.get("started_unix"), float),
                windows=counts.get(job, 0),
                suffix=suffix if isinstance(suffix, str) and "/" not in suffix else "",
            )
        )
    return jobs


def pick(jobs: Sequence[RunJob], job: str | None) -> RunJob | None:
    """The job ``job`` names (its id, or an unambiguous start of it such as its pid); by default
    the newest job that finished a window (the newest of all when none has)."""
    if job is None:
        done = [j for j in jobs if j.windows] or list(jobs)
        return done[-1] if done else None
    if not isinstance(job, str):
        raise TypeError(f"job must be a str (a job id of the run directory) or None, got {job!r}")
    found = [j for j in jobs if j.id == job] or [j for j in jobs if j.id.startswith(job)]
    if len(found) != 1:
        ids = ", ".join(repr(j.id) for j in jobs) or "none"
        what = "matches several jobs" if found else "is not a job of this run directory"
        raise ValueError(f"job {job!r} {what}: its jobs are {ids}")
    return found[0]


def jobs_problem(jobs: Sequence[RunJob], chosen: RunJob) -> str | None:
    """The line ``problems`` starts with when the directory holds several jobs (None otherwise)."""
    if len(jobs) < 2:
        return None
    others = "; ".join(j.describe() for j in jobs if j is not chosen)
    return (
        f"this run directory holds {len(jobs)} jobs (processes that wrote it, kept apart): read here is "
        f"{chosen.describe()}; the other(s): {others}. Pick one with --job ID (read_run(path, job=ID))"
    )


def _number(value: object, kind: type) -> Any:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return kind(value)
