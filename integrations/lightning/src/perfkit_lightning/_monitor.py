"""``PerfMonitor``: each stage epoch's window as metrics for every Lightning logger and sink.

A thin adapter: the Trainer's driver (``_driver``) records the stage timeline once; the
monitor is one of its listeners. For each window of the stages it watches it computes
``perfkit.stages.stage_metrics`` and sends them through one ``SinkFanout``: every Lightning
logger (each its own sink), the run directory, and the ``sinks`` given. Under DDP the
window is already merged over ranks; rank 0 publishes.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from lightning.pytorch import LightningModule, Trainer
from torch.utils.data import DataLoader

import perfkit
import perfkit.torch
from perfkit.checks import check_int, check_number
from perfkit.monitor import StageMonitor
from perfkit.names import RUN_DIR_NAME, STAGES
from perfkit.reports import trial_text
from perfkit.resources import MAX_INTERVAL_S
from perfkit.sinks import Sink, check_sinks
from perfkit.stages import StageWindow, check_stages, intervals_from

from ._attach import attach_report
from ._base import PerfkitCallback, stages_or_phases
from ._console import say
from ._driver import Driver
from ._lightning import log_step, time_gradient_sync

BatchSizeFn = Callable[[Any], int]


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
    ``merge_timeout_s``: how long the ranks wait for each other at an epoch's end to merge their
    windows (``perfkit.torch.TorchRanks``); a rank later than that is named and the merge stops.
    ``trial=True`` runs a loader trial (``perfkit.trial``) on the train DataLoader as training
    starts, on global rank 0, within ``trial_budget_s`` seconds: each worker count's batches/s
    without the model, logged, and recorded in the run directory, where INPUT_BOUND's worker
    proposal takes its gain from it. Off by default: it delays the fit by up to its budget.
    ``phases`` is the deprecated name of ``stages`` (a ``FutureWarning``; gone in the next release).

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
        console: bool = False,
        run_dir: str | None = None,
        save_run: bool = True,
        sample_resources: bool = True,
        sample_interval_s: float = 0.1,
        user_series: bool = True,
        registry: perfkit.Registry | None = None,
        sinks: Sequence[Sink] = (),
        attach_report: bool = True,
        intervals: bool | None = None,
        interval_steps: int | None = None,
        interval_s: float | None = None,
        warmup_steps: int = 10,
        time_gradient_sync: bool = True,
        merge_timeout_s: float = 300.0,
        trial: bool = False,
        trial_budget_s: float = 30.0,
        phases: Iterable[str] | None = None,
    ) -> None:
        stages, argument = stages_or_phases("PerfMonitor", stages, phases)
        self.stages = check_stages(STAGES if stages is None else stages, argument)
        """The stages watched."""
        if not isinstance(prefix, str) or not prefix:
            raise ValueError(f"prefix must be a non-empty str, got {prefix!r}")
        check_int(top_k_slowest, "top_k_slowest")
        if batch_size_fn is not None and not callable(batch_size_fn):
            raise TypeError(f"batch_size_fn must be callable or None, got {batch_size_fn!r}")
        check_number(sample_interval_s, "sample_interval_s", low=0, high=MAX_INTERVAL_S)
        if run_dir is not None and not isinstance(run_dir, (str, Path)):
            raise TypeError(f"run_dir must be a path or None, got {run_dir!r}")
        if registry is not None and not isinstance(registry, perfkit.Registry):
            raise TypeError(f"registry must be a perfkit.Registry or None, got {registry!r}")
        self.enabled = bool(enabled)
        self.include_sanity_check = bool(include_sanity_check)
        self.prefix = prefix
        self.top_k_slowest = top_k_slowest
        self.batch_size_fn = batch_size_fn
        self.console = console
        self.run_dir = run_dir
        self.save_run = save_run
        self.sample_resources = sample_resources
        self.sample_interval_s = float(sample_interval_s)
        self.user_series = user_series
        self.registry = registry
        self.sinks = check_sinks(sinks)
        self.attach_report = bool(attach_report)
        self.intervals = intervals_from(intervals, interval_steps, interval_s, warmup_steps)
        """When epochs are cut into interval windows (None: never)."""
        self.time_gradient_sync = bool(time_gradient_sync)
        self.merge_timeout_s = check_number(merge_timeout_s, "merge_timeout_s")
        self.trial = bool(trial)
        self.trial_budget_s = check_number(trial_budget_s, "trial_budget_s")
        self._monitor: StageMonitor | None = None
        self._last_metrics: dict[str, dict[str, float]] = {}

    @property
    def last_metrics(self) -> dict[str, dict[str, float]]:
        """The last metrics of each stage (merged over ranks, on every rank)."""
        return self._monitor.last_metrics if self._monitor is not None else self._last_metrics

    @property
    def phases(self) -> tuple[str, ...]:
        """Deprecated name of ``stages`` (a ``FutureWarning``; gone in the next release)."""
        warnings.warn(
            "PerfMonitor.phases is deprecated and goes in the next release: use PerfMonitor.stages",
            FutureWarning,
            stacklevel=2,
        )
        return self.stages

    def wants_resources(self) -> bool:
        return self.sample_resources

    # ---- the driver -------------------------------------------------------------------------

    def joined(self, trainer: Trainer, pl_module: LightningModule, driver: Driver) -> None:
        if self.intervals is not None:
            driver.recorder.intervals = self.intervals
        if self.merge_timeout_s != perfkit.torch.gather_ranks.timeout_s:
            driver.recorder.gather = perfkit.torch.TorchRanks(timeout_s=self.merge_timeout_s)
        sinks: list[Sink] = [*driver.logger_sinks()]
        if self.save_run and trainer.is_global_zero:
            sinks.append(driver.writer(self.run_path(driver), self.prefix))
        self._monitor = StageMonitor(
            say=say,
            stages=self.stages,
            sinks=[*sinks, *self.sinks],
            prefix=self.prefix,
            user_series=self.user_series,
            console=bool(self.console),
            publish=trainer.is_global_zero,
            step_of=lambda stage: log_step(trainer, stage),
            interval_step_of=lambda stage: log_step(trainer, stage, interval=True),
            is_open=driver.recorder.is_open,
        )

    def on_fit_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        # the strategy has wrapped the model by now, and no backward has run yet
        if self._driver is not None and self.time_gradient_sync:
            time_gradient_sync(trainer, self._driver.registry)

    def on_train_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        driver, monitor = self._driver, self._monitor
        if not self.trial or driver is None or monitor is None or not trainer.is_global_zero:
            return
        loader = trainer.train_dataloader
        if not isinstance(loader, DataLoader):
            kind = type(loader).__name__
            say(f"perfkit: no loader trial: the train loader is a {kind}, not one DataLoader")
            return
        writer = driver.writer(self.run_path(driver), self.prefix) if self.save_run else None
        result = perfkit.trial(loader, name="train", budget_s=self.trial_budget_s, run=writer)
        monitor.trials = (*monitor.trials, result)
        say(trial_text(result))

    def leaving(self, trainer: Trainer, driver: Driver, *, failed: bool) -> None:
        monitor = self._monitor
        if monitor is not None:
            if not failed and self.save_run:
                path = self.run_path(driver)
                monitor.finish(
                    driver.writer(path, self.prefix) if trainer.is_global_zero else None,
                    driver.registry.snapshot(),
                )
                if self.attach_report and trainer.is_global_zero:
                    attach_report(trainer, path)
            monitor.flush()
            self._last_metrics = monitor.last_metrics
        for sink in self.sinks:
            _close(sink)
        self._monitor = None

    def run_path(self, driver: Driver) -> Path:
        """Where the run directory is: ``run_dir``, else ``LOG_DIR/perfkit-run``."""
        return Path(self.run_dir) if self.run_dir is not None else driver.log_dir / RUN_DIR_NAME

    # ---- windows ------------------------------------------------------------------------------

    def stage_ended(self, window: StageWindow) -> None:
        if self._monitor is not None:
            self._monitor.stage_ended(window)

    def judge_interval(self, window: StageWindow) -> StageWindow:
        return self._monitor.judge_interval(window) if self._monitor is not None else window

    def interval_ended(self, window: StageWindow) -> None:
        if self._monitor is not None:
            self._monitor.interval_ended(window)


def _close(sink: Sink) -> None:
    try:
        sink.close()
    except Exception:  # closing a user's sink at the end of a run must not fail the run
        say(f"perfkit: closing sink {sink!r} failed")
