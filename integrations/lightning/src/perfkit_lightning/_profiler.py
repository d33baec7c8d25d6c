"""``ProfilerCallback``: torch.profiler windows on chosen epochs, phases and steps, read for you.

A window opens at the end of the batch before its first step (so that step's
data fetch is in it) and closes after its last; each cycle of the schedule is
its own profiler session, written to
``{output_dir}/{phase}_epoch{N}[_rank{R}][_cycle{K}].pt.trace.json.gz`` and
analysed off the training thread. Its summary is printed, logged as metrics
(``perf/val/profiler/forward_fraction``, ...) and added to the run directory.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import torch
from lightning.pytorch import Callback, LightningModule, Trainer
from torch.profiler import ProfilerActivity, profile, schedule

import perfkit

from ._ddp import world_size
from ._export import TraceExporter, TraceJob
from ._loaders import hook_loaders
from ._marks import RangeTracer, mark_phases
from ._monitor import _log_step
from ._schedule import Cycle, Schedule

PROFILED_PHASES = ("train", "val", "test")


class _Window:
    """One profiler session in progress."""

    def __init__(self, phase: str, epoch: int, cycle: Cycle, undo: Callable[[], None]) -> None:
        self.phase, self.epoch, self.cycle = phase, epoch, cycle
        self.tracer = RangeTracer()
        self.undo = undo
        self.steps = 0
        self.exported = False
        self.session: profile  # set by the callback right after: its on_trace_ready needs this window


class ProfilerCallback(Callback):
    """torch.profiler windows on ``profile_epochs`` (None: every epoch), for the phases in ``phases``.

    Each window warms up for ``warmup_steps`` and records ``profile_steps`` steps, after
    ``skip_first`` steps and ``wait`` steps before each of ``repeat`` cycles. ``activities``
    is a list of "cpu" / "cuda" (None: CPU, plus CUDA where available). Traces over
    ``max_trace_mb`` are not kept.

    >>> from perfkit_lightning import ProfilerCallback
    >>> profiler = ProfilerCallback(profile_epochs=[1], profile_steps=20, phases=("val",))
    """

    def __init__(
        self,
        enabled: bool = True,
        profile_epochs: Sequence[int] | None = None,
        profile_steps: int = 100,
        warmup_steps: int = 5,
        activities: Sequence[str] | None = None,
        record_shapes: bool = True,
        with_stack: bool = False,
        output_dir: str = "profiler_traces",
        export_chrome_trace: bool = True,
        log_top_k_ops: int = 10,
        *,
        phases: Iterable[str] = ("train", "val"),
        skip_first: int = 0,
        wait: int = 0,
        repeat: int = 1,
        profile_memory: bool = False,
        gzip: bool = True,
        max_trace_mb: float = 500.0,
        console: bool = True,
        run_dir: str | None = None,
    ) -> None:
        self.enabled = bool(enabled)
        self.profile_epochs = _check_epochs(profile_epochs)
        self.schedule = Schedule(skip_first, wait, warmup_steps, profile_steps, repeat)
        self.activities = _activities(activities)
        self.phases = _check_phases(phases)
        if isinstance(log_top_k_ops, bool) or not isinstance(log_top_k_ops, int) or log_top_k_ops < 1:
            raise ValueError(f"log_top_k_ops must be an int >= 1, got {log_top_k_ops!r}")
        if not isinstance(max_trace_mb, (int, float)) or isinstance(max_trace_mb, bool) or max_trace_mb <= 0:
            raise ValueError(f"max_trace_mb must be a number > 0, got {max_trace_mb!r}")
        self.record_shapes, self.with_stack, self.profile_memory = record_shapes, with_stack, profile_memory
        self.output_dir = Path(output_dir)
        self.export_chrome_trace = export_chrome_trace
        self.log_top_k_ops = log_top_k_ops
        self.gzip = gzip
        self.max_trace_mb = float(max_trace_mb)
        self.console = console
        self.run_dir = run_dir
        self._plans: dict[str, list[Cycle]] = {}
        self._window: _Window | None = None
        self._exporter = TraceExporter()
        self._writer: perfkit.RunWriter | None = None
        self._unhook: Callable[[], None] | None = None
        self.traces: list[Path] = []
        """Trace files written on this rank (appended when their export finishes)."""

    # ---- lifecycle ------------------------------------------------------------------------

    def setup(self, trainer: Trainer, pl_module: LightningModule, stage: str) -> None:
        if not self.enabled:
            trainer_any: Any = trainer
            trainer_any.callbacks = [c for c in trainer_any.callbacks if c is not self]
            return
        # The loaders' waits are the trace's data-fetch marks (a PerfMonitor may have hooked them already).
        if self._unhook is None:
            self._unhook = hook_loaders(trainer, perfkit.get_registry())
        # On every rank: trainer.log_dir is a collective under DDP.
        path = Path(self.run_dir or Path(trainer.log_dir or trainer.default_root_dir) / "perfkit")
        if trainer.is_global_zero and self._writer is None:
            self._writer = perfkit.RunWriter(path, meta={"stage": stage})

    def teardown(self, trainer: Trainer, pl_module: LightningModule, stage: str) -> None:
        self._close()
        self._exporter.close()
        self._report(trainer)
        if self._unhook is not None:
            self._unhook()
            self._unhook = None

    def on_exception(self, trainer: Trainer, pl_module: LightningModule, exception: BaseException) -> None:
        self._close()  # the profiler must stop cleanly, whatever interrupted the window

    # ---- phase epochs ---------------------------------------------------------------------

    def on_train_epoch_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._plan("train", trainer, pl_module)

    def on_train_epoch_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._epoch_end("train", trainer)

    def on_validation_epoch_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        if not trainer.sanity_checking:
            self._plan("val", trainer, pl_module)

    def on_validation_epoch_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        if not trainer.sanity_checking:
            self._epoch_end("val", trainer)

    def on_test_epoch_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._plan("test", trainer, pl_module)

    def on_test_epoch_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._epoch_end("test", trainer)

    def _plan(self, phase: str, trainer: Trainer, pl_module: LightningModule) -> None:
        wanted = self.profile_epochs is None or trainer.current_epoch in self.profile_epochs
        if phase not in self.phases or not wanted:
            return
        self._plans[phase] = self.schedule.cycles()
        self._maybe_open(phase, -1, trainer, pl_module)

    def _epoch_end(self, phase: str, trainer: Trainer) -> None:
        self._plans.pop(phase, None)
        if self._window is not None and self._window.phase == phase:
            self._close()  # an epoch shorter than the window: keep what was recorded
        self._report(trainer)

    # ---- steps ----------------------------------------------------------------------------

    def on_train_batch_end(
        self, trainer: Trainer, pl_module: LightningModule, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        self._step_end("train", batch_idx, trainer, pl_module)

    def on_validation_batch_end(
        self,
        trainer: Trainer,
        pl_module: LightningModule,
        outputs: Any,
        batch: Any,
        batch_idx: int,
        dataloader_idx: int = 0,
    ) -> None:
        if not trainer.sanity_checking:
            self._step_end("val", batch_idx, trainer, pl_module)

    def on_test_batch_end(
        self,
        trainer: Trainer,
        pl_module: LightningModule,
        outputs: Any,
        batch: Any,
        batch_idx: int,
        dataloader_idx: int = 0,
    ) -> None:
        self._step_end("test", batch_idx, trainer, pl_module)

    def _step_end(self, phase: str, batch_idx: int, trainer: Trainer, pl_module: LightningModule) -> None:
        window = self._window
        if window is not None and window.phase == phase:
            window.steps += 1
            if batch_idx + 1 >= window.cycle.end:
                self._add_metadata(window)
            with warnings.catch_warnings():
                # One session per cycle: torch's notice that a next cycle would clear events does not apply.
                warnings.filterwarnings("ignore", message=".*clears events at the end of each cycle.*")
                window.session.step()
            if batch_idx + 1 >= window.cycle.end:
                self._close()
        if phase in self._plans and self._window is None:
            self._maybe_open(phase, batch_idx, trainer, pl_module)

    # ---- windows --------------------------------------------------------------------------

    def _maybe_open(self, phase: str, batch_idx: int, trainer: Trainer, pl_module: LightningModule) -> None:
        """Open the cycle whose first step is the next one (``batch_idx + 1``)."""
        plan = self._plans[phase]
        while plan and plan[0].warmup_start < batch_idx + 1:
            plan.pop(0)  # its start went by (an epoch shorter than skip_first, say)
        if not plan or plan[0].warmup_start != batch_idx + 1:
            return
        cycle = plan.pop(0)
        if _profiler_running():
            self._exporter.warn("busy", "perfkit: another profiler is running; this window is skipped")
            return
        job = self._job(phase, trainer.current_epoch, trainer.global_rank, cycle)
        steps = schedule(
            wait=0, warmup=cycle.record_start - cycle.warmup_start, active=cycle.end - cycle.record_start
        )
        window = _Window(phase, trainer.current_epoch, cycle, mark_phases(pl_module))
        window.session = profile(
            activities=self.activities,
            schedule=steps,
            on_trace_ready=lambda prof: self._ready(prof, job, window),
            record_shapes=self.record_shapes,
            profile_memory=self.profile_memory,
            with_stack=self.with_stack,
        )
        perfkit.set_tracer(window.tracer)
        window.session.start()
        self._window = window

    def _job(self, phase: str, epoch: int, rank: int, cycle: Cycle) -> TraceJob:
        name = f"{phase}_epoch{epoch}"
        if world_size() > 1:
            name += f"_rank{rank}"
        if self.schedule.repeat > 1:
            name += f"_cycle{cycle.index}"
        suffix = ".pt.trace.json.gz" if self.gzip else ".pt.trace.json"
        return TraceJob(
            phase=phase,
            epoch=epoch,
            rank=rank,
            path=self.output_dir / (name + suffix),
            compress=self.gzip,
            max_bytes=int(self.max_trace_mb * 1e6),
            top_k=self.log_top_k_ops,
            announce=self.console and rank == 0,
        )

    def _ready(self, prof: profile, job: TraceJob, window: _Window) -> None:
        # Called by torch inside step()/stop(): only hand the finished session over. Torch may call
        # it again, almost empty, when the session stops right after its cycle; and a window that
        # opened after the epoch's last step recorded nothing: neither is exported.
        if window.exported or window.steps == 0 or not self.export_chrome_trace:
            return
        window.exported = True
        self._exporter.submit(prof.profiler, job)

    def _add_metadata(self, window: _Window) -> None:
        sections = sorted(window.tracer.sections)
        window.session.add_metadata_json("perfkit", json.dumps({"sections": sections}))

    def _close(self) -> None:
        window, self._window = self._window, None
        if window is None:
            return
        perfkit.set_tracer(None)
        window.undo()
        try:
            self._add_metadata(window)
            window.session.stop()
        except Exception as exc:  # stopping a profiler must not take training down
            self._exporter.warn("stop", f"perfkit: stopping the profiler failed: {exc!r}")

    # ---- results --------------------------------------------------------------------------

    def _report(self, trainer: Trainer) -> None:
        """Log the analyses that finished (on the training thread: loggers are not thread-safe)."""
        for job, analysis in self._exporter.results():
            self.traces.append(job.path)
            if not trainer.is_global_zero:
                continue
            metrics = _metrics(job, analysis)
            for logger in trainer.loggers:
                try:
                    logger.log_metrics(metrics, step=_log_step(trainer, job.phase))
                except Exception as exc:
                    self._exporter.warn(
                        f"logger:{type(logger).__name__}", f"perfkit: logging failed: {exc!r}"
                    )
            if self._writer is not None:
                self._writer.add_trace(
                    phase=job.phase,
                    epoch=job.epoch,
                    trace=job.path,
                    summary=analysis.to_dict(),
                    rank=job.rank,
                )


def _profiler_running() -> bool:
    # Starting a second profiler does not raise, but exporting the first one then crashes the process.
    running: bool = torch.autograd.profiler._is_profiler_enabled
    return running


def _metrics(job: TraceJob, analysis: perfkit.TraceAnalysis) -> dict[str, float]:
    key = perfkit.metric_key("perf", job.phase, "profiler")
    out = {f"{key}/step_ms": analysis.span_us / max(1, analysis.step_count) / 1e3}
    for phase, share in analysis.phases.shares.items():
        out[f"{key}/{phase}_fraction"] = share
    if analysis.top_cpu_ops:
        out[f"{key}/top_op_self_ms"] = analysis.top_cpu_ops[0].self_us / 1e3
    return out


def _activities(names: Sequence[str] | None) -> list[ProfilerActivity]:
    if names is None:
        cuda = torch.cuda.is_available()
        return [ProfilerActivity.CPU, *([ProfilerActivity.CUDA] if cuda else [])]
    table = {"cpu": ProfilerActivity.CPU, "cuda": ProfilerActivity.CUDA}
    out = []
    for name in names:
        if str(name).lower() not in table:
            raise ValueError(f"activities: unknown activity {name!r}, expected 'cpu' or 'cuda'")
        out.append(table[str(name).lower()])
    return out


def _check_epochs(epochs: Sequence[int] | None) -> frozenset[int] | None:
    if epochs is None:
        return None
    if isinstance(epochs, (str, int)):
        raise TypeError(f"profile_epochs must be a list of epoch numbers or None, got {epochs!r}")
    out = frozenset(epochs)
    bad = [e for e in out if isinstance(e, bool) or not isinstance(e, int) or e < 0]
    if bad:
        raise ValueError(f"profile_epochs: epochs are ints >= 0, got {bad[0]!r}")
    return out


def _check_phases(phases: Iterable[str]) -> tuple[str, ...]:
    if isinstance(phases, str):
        raise TypeError(f"phases must be a list of phase names, got the string {phases!r}")
    out = tuple(phases)
    unknown = [p for p in out if p not in PROFILED_PHASES]
    if unknown:
        raise ValueError(f"phases: unknown phase {unknown[0]!r}, expected some of {list(PROFILED_PHASES)}")
    return out
