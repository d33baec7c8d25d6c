"""``ProfilerCallback``: torch.profiler windows on chosen epochs, stages and steps of a fit, read for you.

A thin adapter over ``perfkit.torch.ProfilerWindows``: it follows the Trainer's stage
timeline (the driver's recorder), so a window belongs to one stage and closes before
another stage starts (validation inside a training epoch), and a window longer than the
stage's epoch is shortened to what there is, with one line saying so. Traces go to
``output_dir`` (default: ``LOG_DIR/perfkit/traces``, inside the run directory); each
window's analysis is logged (``[Profiler] ...``), logged as metrics
(``perf/val/profiler/forward_fraction``, ...) and added to the run directory.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

from lightning.pytorch import LightningModule, Trainer

from perfkit.checks import check_int
from perfkit.names import RUN_DIR_NAME
from perfkit.reports import analysis_text
from perfkit.sinks import SinkFanout
from perfkit.stages import StageWindow, check_stages, metric_key
from perfkit.torch import ProfilerWindows, world_size
from perfkit.trace import TraceAnalysis

from ._base import PerfkitCallback
from ._console import say
from ._driver import Driver
from ._lightning import log_step, total_steps
from ._sinks import log_to_loggers

PROFILED_STAGES = ("train", "val", "test")


class ProfilerCallback(PerfkitCallback):
    """torch.profiler windows on ``profile_epochs`` (None: every epoch), for the ``stages`` listed.

    Each window warms up for ``warmup_steps`` and records ``profile_steps`` steps, after
    ``skip_first`` steps and ``wait`` steps before each of ``repeat`` cycles. ``activities``
    is a list of "cpu" / "cuda" (None: CPU, plus CUDA where available). Traces over
    ``max_trace_mb`` are not kept; ``output_dir`` None puts them in ``LOG_DIR/perfkit/traces``.
    ``stages`` are some of train, val and test (None: train and val).

    >>> from perfkit_lightning import ProfilerCallback
    >>> profiler = ProfilerCallback(profile_epochs=[1], profile_steps=20, stages=("val",))
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
        output_dir: str | None = None,
        export_chrome_trace: bool = True,
        log_top_k_ops: int = 10,
        *,
        stages: Iterable[str] | None = None,
        skip_first: int = 0,
        wait: int = 0,
        repeat: int = 1,
        profile_memory: bool = False,
        gzip: bool = True,
        max_trace_mb: float = 500.0,
        console: bool = True,
        run_dir: str | None = None,
    ) -> None:
        wanted = ("train", "val") if stages is None else stages
        checked = check_stages(wanted, "stages", among=PROFILED_STAGES)
        check_int(log_top_k_ops, "log_top_k_ops", low=1)
        if output_dir is not None and (not isinstance(output_dir, (str, Path)) or not str(output_dir)):
            raise TypeError(f"output_dir must be a non-empty path or None, got {output_dir!r}")
        if run_dir is not None and not isinstance(run_dir, (str, Path)):
            raise TypeError(f"run_dir must be a path or None, got {run_dir!r}")
        self.enabled = bool(enabled)
        self.windows = ProfilerWindows(
            output_dir=output_dir or ".",
            epochs=profile_epochs,
            stages=checked,
            profile_steps=profile_steps,
            warmup_steps=warmup_steps,
            skip_first=skip_first,
            wait=wait,
            repeat=repeat,
            activities=activities,
            record_shapes=record_shapes,
            with_stack=with_stack,
            profile_memory=profile_memory,
            gzip=gzip,
            max_trace_mb=max_trace_mb,
            top_k=log_top_k_ops,
            export=export_chrome_trace,
        )
        self.output_dir = output_dir
        self.console = console
        self.run_dir = run_dir
        self._fanout: SinkFanout | None = None
        self._trainer: Trainer | None = None
        self._driver_ref: Driver | None = None
        self._seen: set[tuple[str, int]] = set()
        self._run = Path(RUN_DIR_NAME)

    @property
    def profile_epochs(self) -> frozenset[int] | None:
        """The epochs profiled (None: every epoch)."""
        return self.windows.epochs

    @property
    def traces(self) -> list[Path]:
        """Trace files written on this rank (appended as their exports finish)."""
        return self.windows.traces

    # ---- the driver ---------------------------------------------------------------------------

    def joined(self, trainer: Trainer, pl_module: LightningModule, driver: Driver) -> None:
        self._trainer, self._driver_ref = trainer, driver
        run = Path(self.run_dir) if self.run_dir is not None else driver.log_dir / RUN_DIR_NAME
        self.windows.output_dir = Path(self.output_dir) if self.output_dir is not None else run / "traces"
        self.windows.configure(module=pl_module, rank=trainer.global_rank, world=world_size())
        self._run = run
        self._fanout = SinkFanout(driver.logger_sinks())

    def leaving(self, trainer: Trainer, driver: Driver, *, failed: bool) -> None:
        self.windows.close()  # an interrupted fit still stops the profiler and writes its trace
        self._report()
        never = sorted(e for e in self.windows.epochs or () if not any(s[1] == e for s in self._seen))
        if never and not failed:
            self.windows.notes.append(f"profile_epochs {never} never ran (the fit ended before them)")
        self._say_notes()
        self._trainer, self._driver_ref, self._fanout = None, None, None

    # ---- following the stages ------------------------------------------------------------------

    def stage_begun(self, stage: str, epoch: int) -> None:
        trainer = self._trainer
        if trainer is None:
            return
        self._seen.add((stage, epoch))
        self.windows.begin(stage, epoch, total_steps=total_steps(trainer, stage))

    def step_ended(self, stage: str, index: int, duration_ns: int) -> None:
        self.windows.step(stage, index)

    def stage_ended(self, window: StageWindow) -> None:
        self.windows.end(window.stage)
        self._report()
        self._say_notes()

    # ---- results --------------------------------------------------------------------------------

    def _report(self) -> None:
        """Log the analyses that finished (on the training thread: loggers are not thread-safe)."""
        trainer, driver = self._trainer, self._driver_ref
        for job, analysis in self.windows.results():
            if trainer is None or driver is None or not trainer.is_global_zero:
                continue
            if self._fanout is not None:
                log_to_loggers(self._fanout, _metrics(job.stage, analysis), log_step(trainer, job.stage))
            writer = driver.writer(self._run)
            if writer is not None:
                writer.add_trace(
                    stage=job.stage,
                    epoch=job.epoch,
                    trace=job.path,
                    summary=analysis.to_dict(),
                    rank=job.rank,
                )
            if self.console:
                lines = analysis_text(analysis).splitlines()
                say("\n".join([f"[Profiler] Trace exported: {job.path}", *lines[1:]]))

    def _say_notes(self) -> None:
        notes, self.windows.notes[:] = list(self.windows.notes), []
        trainer = self._trainer
        if trainer is None or trainer.is_global_zero:
            for note in notes:
                say(f"[Profiler] {note}")


def _metrics(stage: str, analysis: TraceAnalysis) -> dict[str, float]:
    key = metric_key("perf", stage, "profiler")
    out = {f"{key}/step_ms": analysis.span_us / max(1, analysis.step_count) / 1e3}
    for part, share in analysis.parts.shares.items():
        out[f"{key}/{part}_fraction"] = share
    if analysis.top_cpu_ops:
        out[f"{key}/top_op_self_ms"] = analysis.top_cpu_ops[0].self_us / 1e3
    return out
