"""``PerfkitCallback``: the stage account, verdicts and run directory of a Hugging Face ``Trainer``.

A thin adapter, as ``perfkit_lightning.PerfMonitor`` is: one ``perfkit.monitor.Session``, built
from the shared ``Options`` when the Trainer is reached, is fed from the Trainer's callback
events and from its loaders. How the Trainer's loop maps onto perfkit's stage timeline:

* **train**: an epoch runs from ``on_epoch_begin`` (before the Trainer calls ``iter()`` on its
  loader, so worker start-up is in the epoch's data wait) to ``on_epoch_end``. The Trainer
  fetches a whole gradient-accumulation cycle of batches before its first micro-batch
  (``get_batch_samples``): those waits are the data wait, and each *micro-batch* is a step
  (``on_step_begin`` / ``on_substep_end`` / ``on_step_end``), its forward and backward, with the
  optimizer's step inside the cycle's last one. Each step's parts (forward, backward, the
  optimizer step, zero_grad, the rest) come from torch itself (``perfkit.torch.time_step_parts``);
  the optimizer's steps are counted apart (``perf/train/optimizer_steps``,
  ``perf/train/optimizer_step_ms_*``), so with ``gradient_accumulation_steps=4`` they are a
  quarter of the steps.
* **val**: each ``evaluate()``, inside training or not, from the Trainer building its loader
  (``get_eval_dataloader``) to ``on_evaluate``; each batch is a step. Run inside a training
  epoch, it pauses training's clock.
* **predict**: each ``predict()``, from ``get_test_dataloader`` to ``on_predict``.

Metrics go through ``Trainer.log`` (every ``report_to`` tracker gets them), to the run
directory (``OUTPUT_DIR/perfkit-run``) and to the ``sinks`` given; the console block of each
stage epoch goes through ``logging``. Under ``accelerate launch`` the ranks are merged at each
stage epoch's end, bounded in time and bytes (``perfkit.torch.TorchRanks``), and the main
process publishes.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from transformers import TrainerCallback, TrainerControl, TrainerState, TrainingArguments

import perfkit
import perfkit.torch
from perfkit.monitor import Host, Options, Session, console_logger, say_through
from perfkit.names import RUN_DIR_NAME
from perfkit.sinks import Sink
from perfkit.stages import Intervals, StageWindow, batch_size

from ._trainer import StageLoader, find_trainer, wrap_loaders

log = logging.getLogger("perfkit.huggingface")
_fallback: logging.Logger | None = None


def say(text: str) -> None:
    """Log ``text`` where logging is configured, else on stderr by perfkit's own handler (the
    Trainer's library logger shows warnings only), clear of the progress bar."""
    global _fallback
    if _fallback is None:
        _fallback = console_logger("perfkit.huggingface.console")
    say_through(log, _fallback, text)


class _TrainerLog:
    """``Trainer.log`` as a sink: the metrics reach every tracker of ``report_to``."""

    def __init__(self, trainer: Any) -> None:
        self.trainer = trainer

    def emit(self, window: StageWindow, metrics: Any, step: int) -> None:
        self.trainer.log(dict(metrics))

    def close(self) -> None:
        """Nothing to release: the Trainer owns its trackers."""


class PerfkitCallback(TrainerCallback):
    """Per-stage-epoch performance metrics, verdicts and a run directory for a Hugging Face Trainer.

    The arguments are ``perfkit.monitor.Options``, as ``perfkit_lightning.PerfMonitor`` takes them
    (same names, defaults and checks): ``stages`` (of train, val, predict), ``run_dir`` (default
    ``OUTPUT_DIR/perfkit-run``; ``save_run=False`` writes none), ``console`` (each stage epoch's
    block and, at the end of training, the run's ranked verdicts), ``sinks``,
    ``sample_resources``, a long epoch's ``intervals`` (by default on for a run of ``max_steps``
    in one pass, or an epoch still running after three minutes; steps are micro-batches),
    ``time_gradient_sync`` (under DDP, each rank's wait for the gradient all-reduce, so
    STRAGGLER tells a rank's slow compute from the ranks that wait for it) and
    ``merge_timeout_s`` (how long the ranks wait for each other at an epoch's end).

    >>> from perfkit_hf import PerfkitCallback
    >>> callback = PerfkitCallback(stages=("train", "val"), console=False)
    """

    def __init__(
        self,
        *,
        stages: Iterable[str] | None = None,
        prefix: str = "perf",
        console: bool = True,
        run_dir: str | os.PathLike[str] | None = None,
        save_run: bool = True,
        top_k_slowest: int = 5,
        batch_size_fn: Callable[[Any], int | None] | None = None,
        sample_resources: bool = True,
        sample_interval_s: float = 0.1,
        user_series: bool = True,
        registry: perfkit.Registry | None = None,
        sinks: Sequence[Sink] = (),
        intervals: bool | Intervals | None = None,
        interval_steps: int | None = None,
        interval_s: float | None = None,
        warmup_steps: int = 10,
        time_gradient_sync: bool = True,
        merge_timeout_s: float = 300.0,
        flops_per_step: float | None = None,
        peak_tflops: float | None = None,
        watch_syncs: bool = True,
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
        """The options, checked (``perfkit.monitor.Options``)."""
        self.registry = self.options.registry or perfkit.get_registry()
        self.session: Session | None = None
        """The run's session, from when the Trainer is reached."""
        self._trainer: Any = None
        self._undo: list[Any] = []
        self._epochs: dict[str, int] = {}
        self._instrumented: set[int] = set()

    # ---- reaching the Trainer -----------------------------------------------------------------

    def on_init_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kw: Any
    ) -> None:
        self._attach(find_trainer(), args)

    def on_train_begin(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kw: Any
    ) -> None:
        if self._trainer is None:  # added after the Trainer was built (trainer.add_callback)
            self._attach(find_trainer(), args)
        session = self.session
        if session is None:
            return
        if args.max_steps > 0 and state.num_train_epochs <= 1:  # one pass or less: step-based
            session.recorder.mark_long("train")
        # the Trainer has wrapped the model in DDP by now (where it does)
        session.time_gradient_sync(getattr(self._trainer, "model_wrapped", None))

    def _attach(self, trainer: Any, args: TrainingArguments) -> None:
        if self._trainer is not None or trainer is None:
            if trainer is None:
                say("perfkit: the Trainer could not be found from its callback: no data wait, no Trainer.log")
            return
        self._trainer = trainer
        self._undo.append(wrap_loaders(trainer, self._loader))
        host = Host(
            say=say,
            rank=int(args.process_index),
            world=perfkit.torch.world_size(),
            run_path=Path(args.output_dir or ".") / RUN_DIR_NAME,
            meta={"framework": "transformers"},
            sinks=(_TrainerLog(trainer),),
            step_of=lambda stage: int(trainer.state.global_step),
        )
        self.session = Session(self.options, host)

    @property
    def monitor(self) -> Any:
        """The session's ``StageMonitor`` (None before the Trainer is reached)."""
        return self.session.monitor if self.session is not None else None

    def run_path(self, args: TrainingArguments) -> Path | None:
        """Where the run directory is: ``run_dir``, else ``OUTPUT_DIR/perfkit-run`` (None: not saved)."""
        if not self.options.save_run:
            return None
        run_dir = self.options.run_dir
        return Path(run_dir) if run_dir is not None else Path(args.output_dir or ".") / RUN_DIR_NAME

    # ---- loaders --------------------------------------------------------------------------------

    def _loader(self, stage: str, loader: Any) -> Any:
        if not perfkit.is_enabled():
            return loader
        if id(loader) not in self._instrumented and loader is not None:
            # the waits are timed at torch's own iterator (time_wait): accelerate's loaders fetch
            # one batch ahead, so a wait timed around theirs holds two batches' making at an
            # epoch's start (EPOCH_BOUNDARY would claim a batch's production)
            loader = perfkit.torch.instrument(loader, stage, registry=self.registry, time_wait=True)
            self._instrumented.add(id(loader))
        if stage != "train":  # an evaluation begins when its loader is built: its workers start now
            self._begin(stage)
        return StageLoader(loader, lambda source: self._iterate(stage, source))

    def _iterate(self, stage: str, source: Any) -> Iterator[Any]:
        items = iter(source)  # STAGE.data.wait and .data.iter come from the instrumented loader
        rec = self.session.recorder if self.session is not None else None
        try:
            for item in items:
                if rec is None:
                    yield item
                elif stage == "train":  # steps come from the Trainer's events (it fetches ahead)
                    rec.add_samples(stage, batch_size(item) or 0)
                    yield item
                else:
                    rec.step_begin(stage)
                    try:
                        yield item
                    finally:
                        rec.step_end(stage, batch=item)
        finally:
            close = getattr(items, "close", None)
            if close is not None:  # a generator (accelerate's loaders): end it with the epoch
                close()

    def _begin(self, stage: str) -> None:
        session = self.session
        if session is not None and not session.recorder.is_open(stage):
            epoch = self._epochs.get(stage, 0)
            self._epochs[stage] = epoch + 1
            session.begin(stage, epoch)

    def _end(self, stage: str) -> None:
        if self.session is not None:
            self.session.end(stage)

    def _step_begin(self) -> None:
        if self.session is not None:
            self.session.recorder.step_begin("train")

    def _step_end(self) -> None:
        if self.session is not None:
            self.session.recorder.step_end("train")

    # ---- train ----------------------------------------------------------------------------------

    def on_epoch_begin(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kw: Any
    ) -> None:
        self._begin("train")

    def on_step_begin(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kw: Any
    ) -> None:
        self._step_begin()

    def on_substep_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kw: Any
    ) -> None:
        self._step_end()  # a micro-batch ended; the next begins at once
        self._step_begin()

    def on_step_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kw: Any
    ) -> None:
        self._step_end()

    def on_epoch_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kw: Any
    ) -> None:
        self._end("train")

    # ---- evaluation and prediction --------------------------------------------------------------

    def on_evaluate(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kw: Any
    ) -> None:
        self._end("val")

    def on_predict(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, metrics: Any, **kw: Any
    ) -> None:
        self._end("predict")

    # ---- the end --------------------------------------------------------------------------------

    def on_train_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kw: Any
    ) -> None:
        self._end("train")  # a run stopped by max_steps mid-epoch
        if self.session is not None:
            self.session.finish()
