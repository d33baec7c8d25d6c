"""One driver per Trainer: the stage timeline that every perfkit callback on it shares.

The first perfkit callback set up on a Trainer installs it; the others attach to it; the
last to tear down removes it. It owns a ``perfkit.stages.StageRecorder`` and feeds it from
Lightning itself: the loops' ``run`` / epoch methods open and close stage epochs (see
``_lightning``), the ``HookClock`` in front of ``trainer.profiler`` times steps and other
callbacks' hooks, the loaders each loop builds are instrumented (``_loaders``). The
callbacks are the recorder's listeners: PerfMonitor logs each window, the presets map it to
their keys, ProfilerCallback follows the stages with its profiler windows. However many are
stacked, each step is recorded once.
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from lightning.pytorch import Callback, Trainer

import perfkit
import perfkit.torch
from perfkit.resources import ResourceSampler, lease, release
from perfkit.run import RunWriter
from perfkit.stages import StageListener, StageRecorder, batch_size

from ._hookclock import HookClock
from ._lightning import Undo, check, eval_loops, logger_methods, step_based, total_steps, wrap
from ._loaders import hook_loaders
from ._sinks import LoggerSink

_DRIVERS: weakref.WeakKeyDictionary[Trainer, Driver] = weakref.WeakKeyDictionary()
_CARRIED: weakref.WeakKeyDictionary[Trainer, Carried] = weakref.WeakKeyDictionary()


class Carried:
    """What a Trainer's next call (``validate`` / ``test`` / ``predict`` after ``fit``) inherits
    from its last one, whose driver is gone: the count of stand-alone runs per stage, and
    training's time per sample, the other stages' reference."""

    def __init__(self, runs: dict[str, int], train_s_per_sample: float | None) -> None:
        self.runs, self.train_s_per_sample = runs, train_s_per_sample


class Member(Callback, StageListener):
    """What every perfkit callback is to the driver: a listener with a few wishes."""

    registry: perfkit.Registry | None = None
    include_sanity_check: bool = False
    top_k_slowest: int = 0
    batch_size_fn: Callable[[Any], int] | None = None
    sample_interval_s: float = 0.1

    def wants_resources(self) -> bool:
        return False


class Driver:
    """The stage timeline of one Trainer (see the module docstring)."""

    def __init__(self, trainer: Trainer, first: Member) -> None:
        self.trainer = trainer
        self.members: list[Member] = []
        self.registry = first.registry or perfkit.get_registry()
        self.log_dir = Path(trainer.log_dir or trainer.default_root_dir)  # a collective under DDP: every rank
        self.recorder = StageRecorder(
            self.registry,
            top_k_slowest=first.top_k_slowest,
            batch_size_fn=first.batch_size_fn or _tensor_batch_size,
            gather=perfkit.torch.gather_ranks,
            rank=trainer.global_rank,
        )
        self.writers: dict[Path, RunWriter] = {}
        self._logger_sinks: list[LoggerSink] | None = None
        self._sampler: ResourceSampler | None = None
        self._undo: list[Undo] = []
        self._eval: list[str] = []  # evaluation stages running now, innermost last
        carried = _CARRIED.get(trainer) or Carried({}, None)
        self._runs = carried.runs  # stand-alone validate/test/predict runs so far, per stage
        self.recorder.train_s_per_sample = carried.train_s_per_sample
        self.missing = check(trainer)

    # ---- members ----------------------------------------------------------------------------

    def join(self, member: Member) -> None:
        if member in self.members:
            return
        self.members.append(member)
        self.recorder.listeners.append(member)
        self.recorder.top_k_slowest = max(self.recorder.top_k_slowest, member.top_k_slowest)
        if member.batch_size_fn is not None:
            self.recorder.batch_size_fn = member.batch_size_fn
        if member.wants_resources() and self._sampler is None:
            self._sampler = lease(self.registry, member.sample_interval_s)
            self.recorder.sampler = self._sampler

    def leave(self, member: Member) -> bool:
        """Detach ``member``; True when it was the last one (the driver is then gone)."""
        if member in self.members:
            self.members.remove(member)
            self.recorder.listeners.remove(member)
        if self.members:
            return False
        self.uninstall()
        return True

    def logger_sinks(self) -> list[LoggerSink]:
        """One sink per logger of the Trainer, shared by the callbacks (one background queue each)."""
        if self._logger_sinks is None:
            self._logger_sinks = [LoggerSink(logger) for logger in self.trainer.loggers]
        return list(self._logger_sinks)

    def writer(self, path: Path, prefix: str) -> RunWriter:
        """The run directory writer for ``path`` (one per path, shared by the callbacks)."""
        writer = self.writers.get(path)
        if writer is None:
            writer = self.writers[path] = RunWriter(
                path, meta={"stage": self.trainer.state.fn}, prefix=prefix
            )
        return writer

    # ---- installing ---------------------------------------------------------------------------

    def install(self) -> None:
        if self.missing is not None:
            return
        trainer: Any = self.trainer
        self._undo.append(hook_loaders(trainer, self.recorder))
        clock = HookClock(
            trainer.profiler, self.recorder, trainer, ours=self._is_member, eval_stage=self._eval_stage
        )
        original, trainer.profiler = trainer.profiler, clock
        self._undo.append(lambda: setattr(trainer, "profiler", original))
        for logger, method, owner in logger_methods(trainer):
            self._undo.append(wrap(logger, method, functools.partial(clock.timed, owner)))
        fit = trainer.fit_loop
        self._undo.append(wrap(fit, "setup_data", self._train_begins))
        self._undo.append(wrap(fit, "on_advance_start", self._train_begins))
        self._undo.append(wrap(fit, "on_advance_end", self._train_ends))
        for loop, stage in eval_loops(trainer):
            self._undo.append(wrap(loop, "run", self._evaluation(stage, loop is fit.epoch_loop.val_loop)))

    def uninstall(self) -> None:
        for stage in ("sanity", "val", "test", "predict", "train"):
            self.recorder.discard(stage)  # an interrupted run: no collective, no window
        for sink in self._logger_sinks or ():
            sink.close()  # network loggers: a bounded flush, before the Trainer finalizes them
        while self._undo:
            self._undo.pop()()
        if self._sampler is not None:
            release(self._sampler)
            self._sampler = None
        _CARRIED[self.trainer] = Carried(self._runs, self.recorder.train_s_per_sample)
        _DRIVERS.pop(self.trainer, None)

    def _is_member(self, callback: Callback) -> bool:
        return callback in self.members

    # ---- stage boundaries -------------------------------------------------------------------------

    def _train_begins(self, original: Callable[..., Any]) -> Callable[..., Any]:
        def begins(*args: Any, **kwargs: Any) -> Any:
            trainer = self.trainer
            if trainer.training and not trainer.sanity_checking:
                self.recorder.begin("train", trainer.current_epoch)
            out = original(*args, **kwargs)
            if self.recorder.intervals is not None and step_based(trainer):  # loaders are built now
                self.recorder.mark_long("train")
            elif self.recorder.intervals is not None and (steps := total_steps(trainer, "train")) is not None:
                self.recorder.expect_steps("train", steps)  # a long epoch is cut once its pace says so
            return out

        return begins

    def _train_ends(self, original: Callable[..., Any]) -> Callable[..., Any]:
        def ends(*args: Any, **kwargs: Any) -> Any:
            try:
                out = original(*args, **kwargs)
            except BaseException:
                self.recorder.discard("train")
                raise
            self.recorder.end("train")
            return out

        return ends

    def _evaluation(
        self, loop_stage: str, in_fit: bool
    ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        def make(original: Callable[..., Any]) -> Callable[..., Any]:
            def run(*args: Any, **kwargs: Any) -> Any:
                trainer = self.trainer
                stage = "sanity" if trainer.sanity_checking else loop_stage
                if stage == "sanity" and not any(m.include_sanity_check for m in self.members):
                    return original(*args, **kwargs)
                self._eval.append(stage)
                rec = self.recorder
                rec.begin(stage, self._epoch(stage, in_fit), loader="val" if stage == "sanity" else None)
                try:
                    out = original(*args, **kwargs)
                except BaseException:
                    rec.discard(stage)
                    raise
                finally:
                    self._eval.pop()
                if rec.steps(stage):
                    rec.end(stage)
                else:
                    rec.discard(stage)  # the loop had nothing to run (limit_val_batches=0, say)
                return out

            return run

        return make

    def _epoch(self, stage: str, in_fit: bool) -> int:
        if in_fit or stage == "sanity":
            return self.trainer.current_epoch
        # trainer.validate / test / predict: their own count of runs (a test after a 1-epoch fit
        # is the first test, not "test epoch 1").
        n = self._runs.get(stage, 0)
        self._runs[stage] = n + 1
        return n

    def _eval_stage(self, stage: str) -> str:
        return self._eval[-1] if self._eval else stage

    # ---- batches ----------------------------------------------------------------------------------

    def batch_done(self, stage: str, batch: Any) -> None:
        """A batch-end hook of any member: count the step's samples (once)."""
        self.recorder.batch_done(self._eval_stage(stage) if stage != "train" else stage, batch)


def attach(trainer: Trainer, member: Member) -> Driver:
    """The driver of ``trainer`` (installed now if ``member`` is the first), with ``member`` in it."""
    driver = _DRIVERS.get(trainer)
    if driver is None:
        driver = _DRIVERS[trainer] = Driver(trainer, member)
        driver.install()
    driver.join(member)
    return driver


def _tensor_batch_size(batch: Any) -> int | None:
    # Tensors only: the numpy polygons of an OCR batch are not its size.
    return batch_size(batch, of=torch.Tensor)
