"""One driver per Trainer: the session that every perfkit callback on it shares.

The first perfkit callback set up on a Trainer installs it; the others attach to it; the
last to tear down removes it. It owns a ``perfkit.monitor.Session``, built once from every
perfkit callback on the Trainer (the options of the one that publishes, PerfMonitor; the
others' wishes: memory sampling, slowest steps, how to count a batch), and feeds it from
Lightning itself: the loops' ``run`` / epoch methods open and close stage epochs (see
``_lightning``), the ``HookClock`` in front of ``trainer.profiler`` times steps and other
callbacks' hooks, the loaders each loop builds are instrumented (``_loaders``). The callbacks
are the session's listeners: PerfMonitor reads its monitor, the presets map each window to
their keys, ProfilerCallback follows the stages with its profiler windows. However many are
stacked, each step is recorded once. The driver rides on its Trainer (an attribute), and so
does what a Trainer's next call inherits once it is gone.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch
from lightning.pytorch import Callback, Trainer

import perfkit
from perfkit.monitor import Host, Options, Session
from perfkit.names import RUN_DIR_NAME
from perfkit.run import RunWriter
from perfkit.stages import StageListener, StageRecorder, batch_size

from ._console import say
from ._hookclock import HookClock
from ._lightning import Undo, check, eval_loops, log_step, logger_methods, step_based, total_steps, wrap
from ._loaders import hook_loaders
from ._sinks import LoggerSink

DRIVER = "_perfkit_driver"
"""The attribute of a Trainer that holds its driver while one is installed."""
CARRIED = "_perfkit_carried"
"""The attribute of a Trainer that holds what its next call inherits (``Carried``)."""


class Carried:
    """What a Trainer's next call (``validate`` / ``test`` / ``predict`` after ``fit``) inherits
    from its last one, whose driver is gone: the count of stand-alone runs per stage, and
    training's time per sample, the other stages' reference."""

    def __init__(self, runs: dict[str, int], train_s_per_sample: float | None) -> None:
        self.runs, self.train_s_per_sample = runs, train_s_per_sample


class Member(Callback, StageListener):
    """What every perfkit callback is to the driver: a listener with a few wishes."""

    enabled: bool = True
    registry: perfkit.Registry | None = None
    include_sanity_check: bool = False
    top_k_slowest: int = 0
    sample_interval_s: float = 0.1

    def wants_resources(self) -> bool:
        return False

    def session_options(self) -> Options | None:
        """The session's options, from the callback that publishes the run (PerfMonitor); None else."""
        return None


def session_options(members: Sequence[Member]) -> tuple[Options, bool]:
    """The options of the session the ``members`` share, and whether one of them publishes: the
    publishing member's options (else nothing saved or said), with every member's wishes."""
    lead = next((o for o in (m.session_options() for m in members) if o is not None), None)
    base = lead or Options(console=False, save_run=False, registry=next((m.registry for m in members), None))
    wanting = [m for m in members if m.wants_resources()]
    return (
        replace(
            base,
            sample_resources=bool(wanting),
            sample_interval_s=wanting[0].sample_interval_s if wanting else base.sample_interval_s,
            top_k_slowest=max([base.top_k_slowest if lead else 0, *(m.top_k_slowest for m in members)]),
            batch_size_fn=base.batch_size_fn or _tensor_batch_size,
        ),
        lead is not None,
    )


class Driver:
    """The stage timeline of one Trainer (see the module docstring)."""

    def __init__(self, trainer: Trainer, members: Sequence[Member]) -> None:
        self.trainer = trainer
        self.members: list[Member] = []
        self.log_dir = Path(trainer.log_dir or trainer.default_root_dir)  # a collective under DDP: every rank
        self._logger_sinks = [LoggerSink(logger) for logger in trainer.loggers]
        carried = getattr(trainer, CARRIED, None) or Carried({}, None)
        self._runs = carried.runs  # stand-alone validate/test/predict runs so far, per stage
        options, publishes = session_options(members)
        host = Host(
            say=say,
            rank=trainer.global_rank,
            world=trainer.world_size,
            run_path=self.log_dir / RUN_DIR_NAME,
            meta={"stage": trainer.state.fn},
            sinks=self._logger_sinks,
            step_of=lambda stage: log_step(trainer, stage),
            interval_step_of=lambda stage: log_step(trainer, stage, interval=True),
        )
        self.session = Session(
            options, host, monitor=publishes, train_s_per_sample=carried.train_s_per_sample
        )
        self.recorder: StageRecorder = self.session.recorder
        self._undo: list[Undo] = []
        self._eval: list[str] = []  # evaluation stages running now, innermost last
        self.missing = check(trainer)

    # ---- members ----------------------------------------------------------------------------

    def join(self, member: Member) -> None:
        if member not in self.members:
            self.members.append(member)
            self.session.add_listener(member)

    def leave(self, member: Member) -> bool:
        """Detach ``member``; True when it was the last one (the driver is then gone)."""
        if member in self.members:
            self.members.remove(member)
            self.session.remove_listener(member)
        if self.members:
            return False
        self.uninstall()
        return True

    def logger_sinks(self) -> list[LoggerSink]:
        """One sink per logger of the Trainer, shared by the callbacks (one background queue each)."""
        return list(self._logger_sinks)

    def writer(self, path: Path | None = None) -> RunWriter | None:
        """The run directory's writer (``path``: a member's own run directory); None off rank 0."""
        return self.session.run_writer(path)

    # ---- installing ---------------------------------------------------------------------------

    def install(self) -> None:
        if self.missing is not None:
            return
        trainer: Any = self.trainer
        self._undo.append(hook_loaders(trainer, self.recorder))
        clock = HookClock(
            trainer.profiler,
            self.recorder,
            trainer,
            ours=lambda cb: cb in self.members,
            eval_stage=self._eval_stage,
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
        for sink in self._logger_sinks:
            sink.close()  # network loggers: a bounded flush, before the Trainer finalizes them
        while self._undo:
            self._undo.pop()()
        self.session.close()
        trainer: Any = self.trainer
        trainer.__dict__.pop(DRIVER, None)
        setattr(trainer, CARRIED, Carried(self._runs, self.recorder.train_s_per_sample))

    # ---- stage boundaries -------------------------------------------------------------------------

    def _train_begins(self, original: Callable[..., Any]) -> Callable[..., Any]:
        def begins(*args: Any, **kwargs: Any) -> Any:
            trainer = self.trainer
            if trainer.training and not trainer.sanity_checking:
                self.session.begin("train", trainer.current_epoch)
            out = original(*args, **kwargs)
            if step_based(trainer):  # the loaders are built now: a long epoch is cut from its start
                self.recorder.mark_long("train")
            elif (steps := total_steps(trainer, "train")) is not None:
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
                self.session.begin(
                    stage, self._epoch(stage, in_fit), loader="val" if stage == "sanity" else None
                )
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
    """The driver of ``trainer`` (installed now if ``member`` is the first, for every enabled
    perfkit callback on it), with ``member`` in it."""
    driver: Driver | None = getattr(trainer, DRIVER, None)
    if driver is None:
        callbacks: list[Any] = getattr(trainer, "callbacks", [])
        members = [cb for cb in callbacks if isinstance(cb, Member) and cb.enabled]
        driver = Driver(trainer, members if member in members else [member, *members])
        setattr(trainer, DRIVER, driver)
        driver.install()
    driver.join(member)
    return driver


def _tensor_batch_size(batch: Any) -> int | None:
    # Tensors only: the numpy polygons of an OCR batch are not its size.
    return batch_size(batch, of=torch.Tensor)
