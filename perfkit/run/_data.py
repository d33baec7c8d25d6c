"""What a run directory holds, as ``read_run`` returns it: one type per kind of line, and the whole.

run = read_run("runs/exp1")
run.windows[0].metric("step_ms_p95")    # a RunWindow: a stage epoch's StageWindow, as written
run.intervals, run.traces, run.trials   # RunInterval, RunTrace, TrialResult lines of its job
run.own_file("verdicts.json")           # the job's own copy (verdicts_JOB.json beside another job)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._rule import Verdict
from .._snapshot import Snapshot
from ..loaders import TrialResult
from ..stages import Account, SlowStep, StageWindow, stage_prefix
from ._jobs import RunJob
from ._layout import own

if TYPE_CHECKING:
    from ..trace import TraceAnalysis


@dataclass(frozen=True)
class RunWindow:
    """One line of ``windows.jsonl`` (a stage epoch): its ``StageWindow`` (snapshot loaded), the
    metrics logged for it, the metric prefix they carry and the step they were logged at."""

    window: StageWindow
    step: int | None
    prefix: str
    start_ns: int
    end_ns: int
    metrics: Mapping[str, float]
    snapshot_file: str
    job: str = ""
    """The job (process) that wrote it; see ``RunData.jobs``."""
    writer: str | None = None
    """The writer of that job that numbered it (a trainer's fit, then its test)."""

    @property
    def stage(self) -> str:
        return self.window.stage

    @property
    def epoch(self) -> int:
        return self.window.epoch

    @property
    def wall_s(self) -> float:
        return self.window.wall_s

    @property
    def samples(self) -> int | None:
        return self.window.samples

    @property
    def slowest(self) -> tuple[SlowStep, ...]:
        return self.window.slowest

    @property
    def snapshot(self) -> Snapshot:
        return self.window.snapshot

    def metric(self, name: str) -> float | None:
        """``metrics`` by the name after the stage (``"step_ms_p95"``), under the run's prefix."""
        return self.metrics.get(f"{stage_prefix(self.stage, self.prefix)}/{name}")


@dataclass(frozen=True)
class RunInterval:
    """One line of ``intervals.jsonl``: an interval of a stage epoch that was still running (or the
    ``merged`` intervals a long run folded into it), with its metrics and provisional verdicts."""

    stage: str
    epoch: int
    steps: tuple[int, int]
    step: int | None
    wall_s: float
    samples: int | None
    account: Account
    metrics: Mapping[str, float]
    verdicts: tuple[Verdict, ...]
    prefix: str
    start_ns: int
    end_ns: int
    merged: int = 1

    def metric(self, name: str) -> float | None:
        """``metrics`` by the name after the stage (``"step_ms_p95"``)."""
        return self.metrics.get(f"{stage_prefix(self.stage, self.prefix + '/interval')}/{name}")


@dataclass(frozen=True)
class RunTrace:
    """One line of ``traces.jsonl``: a profiler window, its trace file and its analysis (or None)."""

    stage: str
    epoch: int
    rank: int
    trace: Path
    summary: Mapping[str, Any] | None

    @property
    def analysis(self) -> TraceAnalysis | None:
        """``summary`` read as a ``perfkit.trace.TraceAnalysis`` (None when absent or unreadable)."""
        if self.summary is None:
            return None
        from ..trace import TraceAnalysis  # the trace analyser loads only when a report asks

        try:
            return TraceAnalysis.from_dict(self.summary)
        except (ValueError, KeyError, TypeError, ArithmeticError):
            return None


@dataclass(frozen=True)
class RunData:
    """Everything a run directory holds; ``problems`` says what is missing or was skipped."""

    path: Path
    meta: Mapping[str, Any]
    windows: tuple[RunWindow, ...]
    traces: tuple[RunTrace, ...]
    final: Snapshot | None
    problems: tuple[str, ...]
    job: str = ""
    """The job read (its windows, traces and final snapshot); ``""`` for a run of one unnamed job."""
    jobs: tuple[RunJob, ...] = ()
    """Every job that wrote the directory, oldest first (one for a run of one process)."""
    intervals: tuple[RunInterval, ...] = ()
    """The job's interval windows, oldest first (none for a run of short epochs); ``windows`` holds
    the stage epochs only."""
    trials: tuple[TrialResult, ...] = ()
    """The job's loader trials (``perfkit.trial(run=...)``), oldest first."""

    def own_file(self, name: str) -> Path:
        """Where the job read writes its own copy of the file ``name`` (``verdicts.json``,
        ``report.html``): ``name`` itself for the directory's first job, ``verdicts_JOB.json`` for a
        job beside it, so neither replaces the other's."""
        suffix = next((j.suffix for j in self.jobs if j.id == self.job), "")
        return self.path / own(name, suffix)
