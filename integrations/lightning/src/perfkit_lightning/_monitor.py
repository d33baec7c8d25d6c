"""``PerfMonitor``: perfkit's windows as per-epoch metrics of every phase, for every Lightning logger.

A thin adapter: Lightning's hooks open and close ``perfkit.Window``s (the
training window is paused while validation runs inside it), time each step
into ``PHASE.step``, and hand the window to ``perfkit.phase_metrics``. The data
wait comes from the phase's own DataLoaders (see ``_loaders``), worker records
arrive with their batches, memory comes from a ``perfkit.ResourceSampler``.
Under DDP the windows of all ranks are gathered once per epoch and merged.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from lightning.pytorch import Callback, LightningModule, Trainer

import perfkit
from perfkit._context import NODES, get_cell, new_cell
from perfkit._phases import keep_slowest
from perfkit._registry import add_record, check_registry
from perfkit._warn import WarnOnce

from ._ddp import gather
from ._loaders import hook_loaders
from ._sampling import lease, release
from ._summary import summary_line
from ._tags import take_tags

PHASES = ("train", "val", "test", "predict")
BatchSizeFn = Callable[[Any], int]


@dataclass
class _Phase:
    """One phase epoch in progress on this rank."""

    name: str
    epoch: int
    window: perfkit.Window
    step_node: int
    t0: int = 0
    samples: int | None = 0
    slowest: list[tuple[int, int, dict[str, float]]] = field(default_factory=list)


@dataclass(frozen=True)
class _RankWindow:
    """What each rank contributes to an epoch's metrics (gathered in one collective)."""

    snapshot: perfkit.Snapshot
    wall_s: float
    samples: int | None
    slowest: tuple[perfkit.SlowStep, ...]


class PerfMonitor(Callback):
    """Per-epoch performance metrics of train, val, test and predict, logged to every logger.

    For each epoch of each phase: step time (mean, median, p95, p99, max), the wait for data
    per batch and its share of the epoch, samples/s and batches/s, the validation-to-training
    time per sample, every perfkit series recorded in the epoch (sections, ``@timed``, records
    from DataLoader workers), memory peaks from the resource sampler, workers needed, and the
    ``top_k_slowest`` steps with their ``tag_step`` tags. Keys look like ``perf/val/step_ms_p95``.

    >>> from perfkit_lightning import PerfMonitor
    >>> monitor = PerfMonitor(phases=("train", "val"), console=True)
    """

    def __init__(
        self,
        *,
        enabled: bool = True,
        phases: Iterable[str] = PHASES,
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
    ) -> None:
        self.phases = _check_phases(phases)
        if not isinstance(prefix, str) or not prefix:
            raise ValueError(f"prefix must be a non-empty str, got {prefix!r}")
        if isinstance(top_k_slowest, bool) or not isinstance(top_k_slowest, int) or top_k_slowest < 0:
            raise ValueError(f"top_k_slowest must be an int >= 0, got {top_k_slowest!r}")
        if batch_size_fn is not None and not callable(batch_size_fn):
            raise TypeError(f"batch_size_fn must be callable or None, got {batch_size_fn!r}")
        if isinstance(sample_interval_s, bool) or not isinstance(sample_interval_s, (int, float)):
            raise ValueError(f"sample_interval_s must be a number > 0, got {sample_interval_s!r}")
        if not sample_interval_s > 0:
            raise ValueError(f"sample_interval_s must be a number > 0, got {sample_interval_s!r}")
        check_registry(registry)
        self.enabled = bool(enabled)
        self.include_sanity_check = include_sanity_check
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
        self._reg = registry or perfkit.get_registry()
        self._open: dict[str, _Phase] = {}
        self._sampler: perfkit.ResourceSampler | None = None
        self._writer: perfkit.RunWriter | None = None
        self._unhook: Callable[[], None] | None = None
        self._train_s_per_sample: float | None = None
        self._count_samples = True
        self._warn = WarnOnce()
        self.last_metrics: dict[str, dict[str, float]] = {}
        """The last metrics of each phase on this rank (rank 0 holds the merged ones)."""

    # ---- set-up and tear-down -------------------------------------------------------------

    def setup(self, trainer: Trainer, pl_module: LightningModule, stage: str) -> None:
        if not self.enabled:
            # Leave the callback list, so a disabled monitor costs nothing per step.
            # (Trainer sets .callbacks in its connector, so type checkers do not see it.)
            trainer_any: Any = trainer
            trainer_any.callbacks = [c for c in trainer_any.callbacks if c is not self]
            return
        self._reg = self.registry or perfkit.get_registry()
        if self._unhook is None:
            self._unhook = hook_loaders(trainer, self._reg)
        if self.sample_resources and self._sampler is None:
            self._sampler = lease(self._reg, self.sample_interval_s)
        if self.save_run and self._writer is None:
            path = self._run_path(trainer)  # on every rank: trainer.log_dir is a collective under DDP
            if trainer.is_global_zero:
                self._writer = perfkit.RunWriter(path, meta={"stage": stage})

    def teardown(self, trainer: Trainer, pl_module: LightningModule, stage: str) -> None:
        self._stop()
        if self._writer is not None:
            self._writer.finish(self._reg.snapshot())

    def on_exception(self, trainer: Trainer, pl_module: LightningModule, exception: BaseException) -> None:
        self._stop()

    def _stop(self) -> None:
        if self._sampler is not None:
            release(self._sampler)
            self._sampler = None
        if self._unhook is not None:
            self._unhook()
            self._unhook = None

    def _run_path(self, trainer: Trainer) -> Path:
        if self.run_dir is not None:
            return Path(self.run_dir)
        return Path(trainer.log_dir or trainer.default_root_dir) / "perfkit"

    # ---- phase windows ----------------------------------------------------------------------

    def on_train_epoch_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._begin("train", trainer)

    def on_train_epoch_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._end("train", trainer)

    def on_validation_epoch_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        train = self._open.get("train")
        if train is not None:
            train.window.pause()  # validation inside the training epoch is not training time
        self._begin(self._val_phase(trainer), trainer)

    def on_validation_epoch_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._end(self._val_phase(trainer), trainer)
        train = self._open.get("train")
        if train is not None:
            train.window.resume()

    def on_test_epoch_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._begin("test", trainer)

    def on_test_epoch_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._end("test", trainer)

    def on_predict_epoch_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._begin("predict", trainer)

    def on_predict_epoch_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._end("predict", trainer)

    def _val_phase(self, trainer: Trainer) -> str:
        return "sanity" if trainer.sanity_checking else "val"

    def _begin(self, phase: str, trainer: Trainer) -> None:
        if phase == "sanity":
            if not self.include_sanity_check:
                return
        elif phase not in self.phases:
            return
        # The step's node (its series, under whatever section is open now) is found once per epoch.
        step_node = NODES.child((get_cell(None) or new_cell())[0], perfkit.step_series(phase))
        self._open[phase] = _Phase(phase, trainer.current_epoch, perfkit.Window(self._reg), step_node)

    # ---- steps ------------------------------------------------------------------------------

    def on_train_batch_start(
        self, trainer: Trainer, pl_module: LightningModule, batch: Any, batch_idx: int
    ) -> None:
        self._batch_start("train")

    def on_train_batch_end(
        self, trainer: Trainer, pl_module: LightningModule, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        self._batch_end("train", batch, batch_idx, trainer)

    def on_validation_batch_start(
        self,
        trainer: Trainer,
        pl_module: LightningModule,
        batch: Any,
        batch_idx: int,
        dataloader_idx: int = 0,
    ) -> None:
        self._batch_start(self._val_phase(trainer))

    def on_validation_batch_end(
        self,
        trainer: Trainer,
        pl_module: LightningModule,
        outputs: Any,
        batch: Any,
        batch_idx: int,
        dataloader_idx: int = 0,
    ) -> None:
        self._batch_end(self._val_phase(trainer), batch, batch_idx, trainer)

    def on_test_batch_start(
        self,
        trainer: Trainer,
        pl_module: LightningModule,
        batch: Any,
        batch_idx: int,
        dataloader_idx: int = 0,
    ) -> None:
        self._batch_start("test")

    def on_test_batch_end(
        self,
        trainer: Trainer,
        pl_module: LightningModule,
        outputs: Any,
        batch: Any,
        batch_idx: int,
        dataloader_idx: int = 0,
    ) -> None:
        self._batch_end("test", batch, batch_idx, trainer)

    def on_predict_batch_start(
        self,
        trainer: Trainer,
        pl_module: LightningModule,
        batch: Any,
        batch_idx: int,
        dataloader_idx: int = 0,
    ) -> None:
        self._batch_start("predict")

    def on_predict_batch_end(
        self,
        trainer: Trainer,
        pl_module: LightningModule,
        outputs: Any,
        batch: Any,
        batch_idx: int,
        dataloader_idx: int = 0,
    ) -> None:
        self._batch_end("predict", batch, batch_idx, trainer)

    def _batch_start(self, phase: str) -> None:
        state = self._open.get(phase)
        if state is not None:
            state.t0 = self._reg.clock()

    def _batch_end(self, phase: str, batch: Any, batch_idx: int, trainer: Trainer) -> int | None:
        """Record the step; returns its duration in ns (None when the phase is not monitored)."""
        state = self._open.get(phase)
        if state is None:
            return None
        t1 = self._reg.clock()
        add_record(self._reg, state.step_node, state.t0, t1, failed=False)
        if state.samples is not None:
            n = self._batch_size(batch)
            state.samples = None if n is None else state.samples + n
        if self.top_k_slowest:
            keep_slowest(state.slowest, (t1 - state.t0, batch_idx, take_tags()), self.top_k_slowest)
        return t1 - state.t0

    def _batch_size(self, batch: Any) -> int | None:
        if not self._count_samples:
            return None
        if self.batch_size_fn is None:
            return perfkit.batch_size(batch, of=torch.Tensor)
        try:
            return int(self.batch_size_fn(batch))
        except Exception as exc:  # the user's function must not stop training
            self._count_samples = False
            self._warn(
                "batch_size_fn", f"perfkit: batch_size_fn raised {exc!r}; samples/s is off for this run"
            )
            return None

    # ---- the end of a phase epoch -------------------------------------------------------------

    def _end(self, phase: str, trainer: Trainer) -> None:
        state = self._open.pop(phase, None)
        if state is None:
            return
        if self._sampler is not None:
            self._sampler.sample_now()  # the memory peak up to the very end of the window
        window = self._merged(state, trainer)
        reference = None
        if phase != "train":
            running = self._open.get("train")
            reference = (_running_s_per_sample(running) if running else None) or self._train_s_per_sample
        metrics = perfkit.phase_metrics(
            window, prefix=self.prefix, reference_s_per_sample=reference, user_series=self.user_series
        )
        if phase == "train":
            self._train_s_per_sample = window.s_per_sample
        self.last_metrics[phase] = metrics
        if trainer.is_global_zero:
            self._emit(trainer, window, metrics)

    def _merged(self, state: _Phase, trainer: Trainer) -> perfkit.PhaseWindow:
        rank = trainer.global_rank
        mine = _RankWindow(
            snapshot=state.window.close(),
            wall_s=state.window.wall_s,
            samples=state.samples,
            slowest=tuple(
                perfkit.SlowStep(state.name, state.epoch, idx, rank, ns / 1e9, tags)
                for ns, idx, tags in sorted(state.slowest, reverse=True)
            ),
        )
        ranks = gather(mine)
        snapshot = (
            ranks[0].snapshot.merge(*(r.snapshot for r in ranks[1:])) if len(ranks) > 1 else mine.snapshot
        )
        step = perfkit.step_series(state.name)
        samples = [r.samples for r in ranks]
        slowest = sorted((s for r in ranks for s in r.slowest), key=lambda s: -s.duration_s)
        return perfkit.PhaseWindow(
            phase=state.name,
            epoch=state.epoch,
            data=perfkit.data_series("val") if state.name == "sanity" else None,
            snapshot=snapshot,
            wall_s=max(r.wall_s for r in ranks),
            samples=None if any(s is None for s in samples) else sum(s or 0 for s in samples),
            # In rank order; NaN for a rank that ran no step of this phase (an uneven split).
            rank_step_means_s=tuple(
                r.snapshot[step].mean_s if step in r.snapshot else math.nan for r in ranks
            )
            if len(ranks) > 1
            else (),
            slowest=tuple(slowest[: self.top_k_slowest]),
        )

    def _emit(self, trainer: Trainer, window: perfkit.PhaseWindow, metrics: Mapping[str, float]) -> None:
        """On rank 0: log the metrics, save the window, print the summary. Presets override this."""
        step = _log_step(trainer, window.phase)
        self.log_to_loggers(trainer, metrics, step)
        if self._writer is not None:
            self._writer.add_window(window, metrics, step=step)
        if self.console:
            print(summary_line(window, metrics, prefix=self.prefix), flush=True)

    def log_to_loggers(self, trainer: Trainer, metrics: Mapping[str, float], step: int) -> None:
        """Send ``metrics`` to every logger; one that raises is warned about once and skipped."""
        for logger in trainer.loggers:
            try:
                logger.log_metrics(dict(metrics), step=step)
            except Exception as exc:  # a logger that is down must not stop training
                name = type(logger).__name__
                self._warn(f"logger:{name}", f"perfkit: {name}.log_metrics failed: {exc!r}; training goes on")


def _running_s_per_sample(train: _Phase) -> float | None:
    """Training time per sample so far in the epoch (validation ends before training's epoch does)."""
    wall = train.window.wall_s
    return wall / train.samples if train.samples and wall > 0 else None


def _log_step(trainer: Trainer, phase: str) -> int:
    # Lightning logs a training epoch's metrics at the index of its last batch, and validation
    # (which runs before the counter moves on) at the counter itself: line up with both.
    stepped = int(trainer.fit_loop.epoch_loop._batches_that_stepped)
    return max(0, stepped - 1) if phase == "train" else stepped


def _check_phases(phases: Iterable[str]) -> tuple[str, ...]:
    if isinstance(phases, str):
        raise TypeError(f"phases must be a list of phase names, got the string {phases!r}")
    out = tuple(phases)
    unknown = [p for p in out if p not in PHASES]
    if unknown:
        raise ValueError(f"phases: unknown phase {unknown[0]!r}, expected some of {list(PHASES)}")
    return out
