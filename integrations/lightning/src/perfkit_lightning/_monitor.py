"""``PerfMonitor``: each stage epoch's window as metrics for every Lightning logger and sink.

A thin adapter: the Trainer's driver (``_driver``) records the stage timeline once; the
monitor is one of its listeners. For each window of the stages it watches it computes
``perfkit.stages.stage_metrics`` and sends them through one ``SinkFanout``: every Lightning
logger (each its own sink), the run directory, and the ``sinks`` given. Under DDP the
window is already merged over ranks; rank 0 publishes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from lightning.pytorch import LightningModule, Trainer
from torch.utils.data import DataLoader

import perfkit
from perfkit.checks import check_number
from perfkit.monitor import Options, StageMonitor
from perfkit.names import STAGES
from perfkit.reports import trial_text
from perfkit.sinks import Sink
from perfkit.stages import Intervals

from ._attach import attach_report
from ._base import PerfkitCallback
from ._console import say
from ._driver import Driver

BatchSizeFn = Callable[[Any], int | None]


class PerfMonitor(PerfkitCallback):
    """Per-epoch performance metrics of train, val, test and predict, logged to every logger.

    For each epoch of each of ``stages`` (None: all of ``STAGES``): step time (mean, median,
    p95, p99, max), the wait for data per batch and its share of the epoch, the account of the
    epoch's time (data wait, step, each callback, loader set-up, other), samples/s and
    batches/s, the validation-to-training time per sample, every perfkit series recorded in
    the epoch (sections, ``@timed``, records from DataLoader workers), memory peaks from the
    resource sampler, workers needed, and the ``top_k_slowest`` steps with their ``tag_step``
    tags. Keys look like ``perf/val/step_ms_p95``. ``sinks`` get the same metrics (a
    ``perfkit.sinks`` sink each). At the end of a fit the run's verdicts go to
    ``RUN_DIR/verdicts.json`` and, with ``attach_report``, its HTML report to the W&B and
    MLflow runs of the Trainer's loggers.
    A long epoch is also reported while it runs, in interval windows (``PREFIX/interval/STAGE/...``
    at the global step, a provisional console block, a CHANGE verdict when an interval moves
    beyond noise): every ``interval_steps`` steps or ``interval_s`` seconds after
    ``warmup_steps`` steps left out. ``intervals`` None (the default) cuts only long epochs: a
    step-based fit (``max_steps`` ending inside the first epoch, a loader without a length) or an
    epoch still running after three minutes, every minute unless a length is given; True every
    epoch; False never.
    Under DDP, ``time_gradient_sync`` times each rank's wait for the gradient all-reduce
    (``perfkit.torch.time_gradient_sync``, registered on the strategy's DDP model as the fit
    starts), so STRAGGLER tells a rank whose compute is slow from the ranks waiting for it; where
    the model already has a communication hook of its own, that hook is kept and perfkit says so.
    These are ``perfkit.monitor.Options``, shared with the Hugging Face callback (same names,
    defaults and checks). PerfMonitor's own: ``enabled``, ``include_sanity_check`` (the sanity
    check's validation as a stage of its own), ``attach_report``, and ``trial=True``, which runs a
    loader trial (``perfkit.trial``) on the train DataLoader as training starts, on global rank 0,
    within ``trial_budget_s`` seconds: each worker count's batches/s without the model, logged,
    and recorded in the run directory, where INPUT_BOUND's worker proposal takes its gain from
    it. Off by default: it delays the fit by up to its budget.

    >>> from perfkit_lightning import PerfMonitor
    >>> monitor = PerfMonitor(stages=("train", "val"), console=True)
    """

    def __init__(
        self,
        *,
        enabled: bool = True,
        stages: Iterable[str] | None = None,
        include_sanity_check: bool = False,
        prefix: str = "perf",
        top_k_slowest: int = 5,
        batch_size_fn: BatchSizeFn | None = None,
        console: bool = True,
        run_dir: str | Path | None = None,
        save_run: bool = True,
        sample_resources: bool = True,
        sample_interval_s: float = 0.1,
        user_series: bool = True,
        registry: perfkit.Registry | None = None,
        sinks: Sequence[Sink] = (),
        attach_report: bool = True,
        intervals: bool | Intervals | None = None,
        interval_steps: int | None = None,
        interval_s: float | None = None,
        warmup_steps: int = 10,
        time_gradient_sync: bool = True,
        merge_timeout_s: float = 300.0,
        flops_per_step: float | None = None,
        peak_tflops: float | None = None,
        watch_syncs: bool = True,
        trial: bool = False,
        trial_budget_s: float = 30.0,
    ) -> None:
        self.options = Options(
            stages=stages,
            prefix=prefix,
            console=console,
            run_dir=run_dir,
            save_run=save_run,
            top_k_slowest=top_k_slowest,
            batch_size_fn=batch_size_fn,
            sample_resources=sample_resources,
            sample_interval_s=sample_interval_s,
            user_series=user_series,
            registry=registry,
            sinks=sinks,
            intervals=intervals,
            interval_steps=interval_steps,
            interval_s=interval_s,
            warmup_steps=warmup_steps,
            time_gradient_sync=time_gradient_sync,
            merge_timeout_s=merge_timeout_s,
            flops_per_step=flops_per_step,
            peak_tflops=peak_tflops,
            watch_syncs=watch_syncs,
        )
        """The options, checked (``perfkit.monitor.Options``): the session's, when this monitor publishes."""
        self.registry = registry
        self.top_k_slowest = top_k_slowest
        self.sample_interval_s = float(sample_interval_s)
        self.enabled = bool(enabled)
        self.include_sanity_check = bool(include_sanity_check)
        self.attach_report = bool(attach_report)
        self.trial = bool(trial)
        self.trial_budget_s = check_number(trial_budget_s, "trial_budget_s")
        self._monitor: StageMonitor | None = None
        self._last_metrics: dict[str, dict[str, float]] = {}

    # ---- what the driver reads (Member) ---------------------------------------------------------

    def session_options(self) -> Options:
        return self.options

    def wants_resources(self) -> bool:
        return self.options.sample_resources

    @property
    def stages(self) -> tuple[str, ...]:
        """The stages watched."""
        return tuple(self.options.stages or STAGES)

    @property
    def intervals(self) -> Intervals | None:
        """When epochs are cut into interval windows (None: never)."""
        return self.options.intervals_plan()

    @property
    def last_metrics(self) -> dict[str, dict[str, float]]:
        """The last metrics of each stage (merged over ranks, on every rank)."""
        return self._monitor.last_metrics if self._monitor is not None else self._last_metrics

    # ---- the driver -------------------------------------------------------------------------

    def joined(self, trainer: Trainer, pl_module: LightningModule, driver: Driver) -> None:
        self._monitor = driver.session.monitor

    def on_fit_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        # the strategy has wrapped the model by now, and no backward has run yet
        if self._driver is not None:
            self._driver.session.time_gradient_sync(getattr(trainer.strategy, "model", None))

    def on_train_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        driver, monitor = self._driver, self._monitor
        if not self.trial or driver is None or monitor is None or not trainer.is_global_zero:
            return
        loader = trainer.train_dataloader
        if not isinstance(loader, DataLoader):
            kind = type(loader).__name__
            say(f"perfkit: no loader trial: the train loader is a {kind}, not one DataLoader")
            return
        result = perfkit.trial(loader, name="train", budget_s=self.trial_budget_s, run=driver.writer())
        monitor.trials = (*monitor.trials, result)
        say(trial_text(result))

    def leaving(self, trainer: Trainer, driver: Driver, *, failed: bool) -> None:
        monitor = self._monitor
        if monitor is not None:
            if failed:
                monitor.flush()
            else:
                driver.session.finish()
                path = driver.session.run_path
                if self.attach_report and trainer.is_global_zero and path is not None:
                    attach_report(trainer, path)
            self._last_metrics = monitor.last_metrics
        for sink in self.options.sinks:
            _close(sink)
        self._monitor = None


def _close(sink: Sink) -> None:
    try:
        sink.close()
    except Exception:  # closing a user's sink at the end of a run must not fail the run
        say(f"perfkit: closing sink {sink!r} failed")
