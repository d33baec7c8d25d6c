"""``ProfilerWindows``: torch.profiler windows on chosen stages, epochs and steps of any loop.

A window opens at the end of the step before its first step (so that step's data fetch is
in it) and closes after its last, or when its stage ends or another stage begins: a window
belongs to one stage. Each cycle of the schedule is its own profiler session, written to
``{output_dir}/{stage}_epoch{N}[_rank{R}][_cycle{K}].pt.trace.json.gz`` (a number is added
rather than overwrite a file) and analysed off the loop's thread. While a window records,
perfkit's sections and ``@timed`` calls are named ranges of the trace, and a module's step,
``backward`` and ``optimizer_step`` are part marks.

It is a ``StageListener``: give it to a ``StageRecorder`` (``perfkit.window(...,
listeners=[windows])`` in a script; ``ProfilerCallback`` on a Lightning Trainer) or call
``begin`` / ``step`` / ``end`` yourself. What it had to shorten or skip is in ``notes``.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import torch
from torch.profiler import ProfilerActivity, profile, schedule

from .._state import set_tracer
from .._validate import check_int
from ..names import TRACE_METADATA_KEY
from ..run import file_stem
from ..stages import StageListener, StageWindow, check_stages
from ..trace import TraceAnalysis
from ._export import TraceExporter, TraceJob
from ._marks import RangeTracer, mark_parts
from ._schedule import Cycle, Schedule

MAX_TRACE_MB = 100_000.0
"""Largest ``max_trace_mb`` (100 GB)."""


class _Window:
    """One profiler session in progress."""

    def __init__(self, stage: str, epoch: int, cycle: Cycle, undo: Callable[[], None], job: TraceJob) -> None:
        self.stage, self.epoch, self.cycle, self.job = stage, epoch, cycle, job
        self.tracer = RangeTracer()
        self.undo = undo
        self.steps = 0
        self.exported = False
        self.session: profile  # set right after: its on_trace_ready needs this window


class ProfilerWindows(StageListener):
    """torch.profiler windows on ``epochs`` (None: every epoch) of the ``stages`` given.

    Each window warms up for ``warmup_steps`` and records ``profile_steps`` steps, after
    ``skip_first`` steps and ``wait`` steps before each of ``repeat`` cycles (as
    ``torch.profiler.schedule``, but per stage epoch). ``activities`` is a list of "cpu" /
    "cuda" (None: CPU, plus CUDA where available). Traces over ``max_trace_mb`` are not kept.

    Use it as a context manager around the loop (or call ``close()``): a loop interrupted
    inside a window still gets its trace written and the export thread joined.

    >>> from perfkit.torch import ProfilerWindows
    >>> windows = ProfilerWindows(output_dir="traces", epochs=[1], stages=["val"], profile_steps=5)
    """

    def __init__(
        self,
        *,
        output_dir: str | Path = "profiler_traces",
        epochs: Iterable[int] | None = None,
        stages: Iterable[str] = ("train", "val"),
        profile_steps: int = 100,
        warmup_steps: int = 5,
        skip_first: int = 0,
        wait: int = 0,
        repeat: int = 1,
        activities: Sequence[str] | None = None,
        record_shapes: bool = True,
        with_stack: bool = False,
        profile_memory: bool = False,
        gzip: bool = True,
        max_trace_mb: float = 500.0,
        top_k: int = 10,
        export: bool = True,
    ) -> None:
        self.output_dir = _check_dir(output_dir)
        self.epochs = check_epochs(epochs)
        self.stages = check_stages(stages, among=None)  # a plain script may name its own stages
        self.schedule = Schedule(skip_first, wait, warmup_steps, profile_steps, repeat)
        self.activities = activity_list(activities)
        check_int(top_k, "top_k", low=1, high=10_000)
        if (
            isinstance(max_trace_mb, bool)
            or not isinstance(max_trace_mb, (int, float))
            or not 0 < max_trace_mb <= MAX_TRACE_MB  # NaN fails both
        ):
            raise ValueError(
                f"max_trace_mb must be a finite number in (0, {MAX_TRACE_MB:,}], got {max_trace_mb!r}"
            )
        self.record_shapes, self.with_stack, self.profile_memory = record_shapes, with_stack, profile_memory
        self.gzip = gzip
        self.max_trace_mb = float(max_trace_mb)
        self.top_k = top_k
        self.export = export
        self.notes: list[str] = []
        """What was shortened or skipped, in words (an adapter logs them)."""
        self.traces: list[Path] = []
        """Trace files written (appended when their export finishes and ``results()`` collects them)."""
        self._plans: dict[str, list[Cycle]] = {}
        self._epoch: dict[str, int] = {}
        self._window: _Window | None = None
        self._exporter = TraceExporter()
        self._module: Any = None
        self._rank, self._world = 0, 1
        self._claimed: set[Path] = set()

    # ---- as a StageListener -----------------------------------------------------------------

    def stage_begun(self, stage: str, epoch: int) -> None:
        self.begin(stage, epoch)

    def step_ended(self, stage: str, index: int, duration_ns: int) -> None:
        self.step(stage, index)

    def stage_ended(self, window: StageWindow) -> None:
        self.end(window.stage)

    # ---- driving it ---------------------------------------------------------------------------

    def configure(self, *, module: Any = None, rank: int = 0, world: int = 1) -> None:
        """The module whose step methods become part marks, and this process's rank among ``world``."""
        self._module, self._rank, self._world = module, rank, world

    def wanted(self, stage: str, epoch: int) -> bool:
        """Whether ``stage``'s epoch ``epoch`` is to be profiled."""
        return stage in self.stages and (self.epochs is None or epoch in self.epochs)

    def begin(self, stage: str, epoch: int, *, total_steps: int | None = None) -> None:
        """A ``stage`` epoch begins: plan its windows (``total_steps``, when known, shortens them)."""
        if self._window is not None and self._window.stage != stage:
            self._close()  # a window belongs to one stage: validation starting inside training ends it
        if not self.wanted(stage, epoch):
            return
        self._plans[stage] = self._fit(stage, epoch, self.schedule.cycles(), total_steps)
        self._epoch[stage] = epoch
        self._maybe_open(stage, -1)

    def step(self, stage: str, index: int) -> None:
        """Step ``index`` (0-based, within the stage epoch) of ``stage`` ended."""
        window = self._window
        if window is not None and window.stage == stage:
            window.steps += 1
            last = index + 1 >= window.cycle.end
            if last:
                self._add_metadata(window)
            with warnings.catch_warnings():
                # One session per cycle: torch's notice that a next cycle would clear events does not apply.
                warnings.filterwarnings("ignore", message=".*clears events at the end of each cycle.*")
                window.session.step()
            if last:
                self._close()
        if stage in self._plans and self._window is None:
            self._maybe_open(stage, index)

    def end(self, stage: str) -> None:
        """The ``stage`` epoch ended: a window still open (an epoch shorter than it) keeps what it has."""
        plan = self._plans.pop(stage, None)
        if self._window is not None and self._window.stage == stage:
            self._close()
        if plan:
            self.notes.append(
                f"{stage} epoch {self._epoch.get(stage)} ended before {len(plan)} profiler window(s) began"
            )

    def close(self) -> None:
        """Stop a window in progress (training interrupted), wait for the exports, stop the thread."""
        self._close()
        self._exporter.close()

    def __enter__(self) -> ProfilerWindows:
        return self

    def __exit__(self, *exc: object) -> None:
        """However the block ends (an exception, Ctrl-C): the window stops, its trace is written
        and the export thread is joined (``close``)."""
        self.close()

    def results(self) -> list[tuple[TraceJob, TraceAnalysis]]:
        """The windows whose trace was written and analysed since the last call."""
        done = self._exporter.results()
        self.traces += [job.path for job, _ in done]
        return done

    @property
    def warn(self) -> Callable[[str, str], bool]:
        """Warn once per kind of fault (shared with the export thread)."""
        return self._exporter.warn

    # ---- windows ------------------------------------------------------------------------------

    def _fit(self, stage: str, epoch: int, cycles: list[Cycle], total: int | None) -> list[Cycle]:
        if total is None:
            return cycles
        out = []
        for c in cycles:
            if c.record_start >= total:
                self.notes.append(
                    f"{stage} epoch {epoch} has {total} steps: the window recording steps "
                    f"{c.record_start}-{c.end - 1} does not fit and is skipped"
                )
                continue
            if c.end > total:
                self.notes.append(
                    f"{stage} epoch {epoch} has {total} steps: the window is shortened to steps "
                    f"{c.record_start}-{total - 1}"
                )
                c = Cycle(c.index, c.warmup_start, c.record_start, total)
            out.append(c)
        return out

    def _maybe_open(self, stage: str, index: int) -> None:
        """Open the cycle whose first step is the next one (``index + 1``)."""
        plan = self._plans[stage]
        while plan and plan[0].warmup_start < index + 1:
            plan.pop(0)  # its start went by (an epoch shorter than skip_first, say)
        if not plan or plan[0].warmup_start != index + 1:
            return
        cycle = plan.pop(0)
        if profiler_running():
            self.warn("busy", "perfkit: another profiler is running; this profiler window is skipped")
            return
        epoch = self._epoch[stage]
        undo = mark_parts(self._module) if self._module is not None else _nothing
        window = _Window(stage, epoch, cycle, undo, self._job(stage, epoch, cycle))
        steps = schedule(
            wait=0, warmup=cycle.record_start - cycle.warmup_start, active=cycle.end - cycle.record_start
        )
        window.session = profile(
            activities=self.activities,
            schedule=steps,
            on_trace_ready=lambda prof: self._ready(prof, window),
            record_shapes=self.record_shapes,
            profile_memory=self.profile_memory,
            with_stack=self.with_stack,
        )
        set_tracer(window.tracer)
        window.session.start()
        self._window = window

    def _job(self, stage: str, epoch: int, cycle: Cycle) -> TraceJob:
        name = f"{file_stem(stage)}_epoch{epoch}"  # a stage name never becomes a path
        if self._world > 1:
            name += f"_rank{self._rank}"
        if self.schedule.repeat > 1:
            name += f"_cycle{cycle.index}"
        suffix = ".pt.trace.json.gz" if self.gzip else ".pt.trace.json"
        path = self.output_dir / (name + suffix)
        k = 2
        # Neither an earlier run's trace nor one of ours still being written is overwritten.
        while path.exists() or path in self._claimed:
            path = self.output_dir / f"{name}_{k}{suffix}"
            k += 1
        self._claimed.add(path)
        return TraceJob(
            stage=stage,
            epoch=epoch,
            rank=self._rank,
            path=path,
            compress=self.gzip,
            max_bytes=int(self.max_trace_mb * 1e6),
            top_k=self.top_k,
        )

    def _ready(self, prof: profile, window: _Window) -> None:
        # Called by torch inside step()/stop(): only hand the finished session over. Torch may call
        # it again, almost empty, when the session stops right after its cycle; and a window that
        # opened after the epoch's last step recorded nothing: neither is exported.
        if window.exported or window.steps == 0 or not self.export:
            return
        window.exported = True
        self._exporter.submit(prof.profiler, window.job)

    def _add_metadata(self, window: _Window) -> None:
        sections = sorted(window.tracer.sections)
        window.session.add_metadata_json(TRACE_METADATA_KEY, json.dumps({"sections": sections}))

    def _close(self) -> None:
        window, self._window = self._window, None
        if window is None:
            return
        set_tracer(None)
        window.undo()
        try:
            self._add_metadata(window)
            window.session.stop()
        except Exception as exc:  # stopping a profiler must not take training down
            self.warn("stop", f"perfkit: stopping the profiler failed: {exc!r}")


def _nothing() -> None:
    """Undo for a window that wrapped no module."""


def profiler_running() -> bool:
    """Whether a torch profiler records now (starting a second one does not raise, but exporting the
    first then crashes the process)."""
    running: bool = torch.autograd.profiler._is_profiler_enabled
    return running


def activity_list(names: Sequence[str] | None) -> list[ProfilerActivity]:
    """Profiler activities from names ("cpu", "cuda"); None: CPU, plus CUDA where available."""
    if names is None:
        cuda = torch.cuda.is_available()
        return [ProfilerActivity.CPU, *([ProfilerActivity.CUDA] if cuda else [])]
    if isinstance(names, str):
        raise TypeError(f"activities must be a list such as ['cpu', 'cuda'], got the string {names!r}")
    if not isinstance(names, Iterable):
        raise TypeError(f"activities must be a list such as ['cpu', 'cuda'], got {names!r}")
    table = {"cpu": ProfilerActivity.CPU, "cuda": ProfilerActivity.CUDA}
    out = []
    for name in names:
        if str(name).lower() not in table:
            raise ValueError(f"activities: unknown activity {name!r}, expected 'cpu' or 'cuda'")
        out.append(table[str(name).lower()])
    return out


def check_epochs(epochs: Iterable[int] | None) -> frozenset[int] | None:
    """``epochs=``: a list of epoch numbers, or None for every epoch."""
    if epochs is None:
        return None
    if isinstance(epochs, (str, int)) or not isinstance(epochs, Iterable):
        raise TypeError(f"profile_epochs must be a list of epoch numbers or None, got {epochs!r}")
    out = frozenset(epochs)
    bad = [e for e in out if isinstance(e, bool) or not isinstance(e, int) or e < 0]
    if bad:
        raise ValueError(f"profile_epochs: epochs are ints >= 0, got {bad[0]!r}")
    return out


def _check_dir(path: object) -> Path:
    if not isinstance(path, (str, Path)) or not str(path):
        raise TypeError(f"output_dir must be a non-empty path, got {path!r}")
    return Path(path)
