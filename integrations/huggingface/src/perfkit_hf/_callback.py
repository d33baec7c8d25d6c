"""``PerfkitCallback``: the stage account, verdicts and run directory of a Hugging Face ``Trainer``.

A thin adapter, as ``perfkit_lightning.PerfMonitor`` is: a ``StageRecorder`` is fed from the
Trainer's callback events and from its loaders, and a ``perfkit.monitor.StageMonitor``
publishes each stage epoch. How the Trainer's loop maps onto perfkit's stage timeline:

* **train**: an epoch runs from ``on_epoch_begin`` (before the Trainer calls ``iter()`` on its
  loader, so worker start-up is in the epoch's data wait) to ``on_epoch_end``. The Trainer
  fetches a whole gradient-accumulation cycle of batches before its first micro-batch
  (``get_batch_samples``): those waits are the data wait, and each *micro-batch* is a step
  (``on_step_begin`` / ``on_substep_end`` / ``on_step_end``), its forward and backward, with the
  optimizer's step inside the cycle's last one. The optimizer's steps are timed apart
  (``perf/train/optimizer_steps``, ``perf/train/optimizer_step_ms_*``), so with
  ``gradient_accumulation_steps=4`` they are a quarter of the steps.
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
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from transformers import TrainerCallback, TrainerControl, TrainerState, TrainingArguments

import perfkit
import perfkit.torch
from perfkit.monitor import StageMonitor, console_logger, say_through
from perfkit.names import RUN_DIR_NAME, STAGES, optimizer_series
from perfkit.resources import ResourceSampler, lease, release
from perfkit.run import RunWriter
from perfkit.sinks import Sink, check_sinks
from perfkit.stages import StageRecorder, StageWindow, batch_size, check_stages, intervals_from

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

    ``stages``: which of train, val, predict to publish; ``run_dir``: where the run directory
    goes (default ``OUTPUT_DIR/perfkit-run``; ``save_run=False`` writes none); ``console``: say
    each stage epoch's block and, at the end of training, the run's ranked verdicts;
    ``sinks``: more ``perfkit.sinks`` sinks; ``sample_resources``: poll memory while training.
    ``intervals``, ``interval_steps``, ``interval_s``, ``warmup_steps``: a long epoch's interval
    windows, as on ``perfkit_lightning.PerfMonitor`` (by default on for a run of ``max_steps`` in
    one pass, or an epoch still running after three minutes; steps are micro-batches).
    ``time_gradient_sync``: under DDP, time each rank's wait for the gradient all-reduce
    (``perfkit.torch.time_gradient_sync``), so STRAGGLER tells a rank's slow compute from the
    ranks that wait for it. ``merge_timeout_s``: how long the ranks wait for each other at an
    epoch's end to merge their windows; a rank later than that is named and the merge stops.

    >>> from perfkit_hf import PerfkitCallback
    >>> callback = PerfkitCallback(stages=("train", "val"), console=False)
    """

    def __init__(
        self,
        *,
        stages: Iterable[str] = STAGES,
        run_dir: str | os.PathLike[str] | None = None,
        save_run: bool = True,
        console: bool = True,
        prefix: str = "perf",
        top_k_slowest: int = 5,
        sample_resources: bool = True,
        sample_interval_s: float = 0.1,
        registry: perfkit.Registry | None = None,
        sinks: Sequence[Sink] = (),
        intervals: bool | None = None,
        interval_steps: int | None = None,
        interval_s: float | None = None,
        warmup_steps: int = 10,
        time_gradient_sync: bool = True,
        merge_timeout_s: float = 300.0,
    ) -> None:
        self.stages = check_stages(stages, "stages")
        if run_dir is not None and not isinstance(run_dir, (str, os.PathLike)):
            raise TypeError(f"run_dir must be a path or None, got {run_dir!r}")
        if not isinstance(prefix, str) or not prefix:
            raise ValueError(f"prefix must be a non-empty str, got {prefix!r}")
        if registry is not None and not isinstance(registry, perfkit.Registry):
            raise TypeError(f"registry must be a perfkit.Registry or None, got {registry!r}")
        self.run_dir = run_dir
        self.save_run = bool(save_run)
        self.console = bool(console)
        self.prefix = prefix
        self.sample_resources = bool(sample_resources)
        self.sample_interval_s = sample_interval_s
        self.time_gradient_sync = bool(time_gradient_sync)
        self.ranks = perfkit.torch.TorchRanks(timeout_s=merge_timeout_s)
        self.registry = registry or perfkit.get_registry()
        self.sinks = check_sinks(sinks)
        self.recorder = StageRecorder(self.registry, top_k_slowest=top_k_slowest)
        self.recorder.intervals = intervals_from(intervals, interval_steps, interval_s, warmup_steps)
        self.monitor: StageMonitor | None = None
        self._optimizer_t0: int | None = None
        self._trainer: Any = None
        self._undo: list[Any] = []
        self._epochs: dict[str, int] = {}
        self._sampler: ResourceSampler | None = None
        self._writer: RunWriter | None = None
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
        if args.max_steps > 0 and state.num_train_epochs <= 1:  # one pass or less: step-based
            self.recorder.mark_long("train")
        if self.sample_resources and self._sampler is None:
            self._sampler = lease(self.registry, self.sample_interval_s)
            self.recorder.sampler = self._sampler
        if self.time_gradient_sync and self._trainer is not None:
            self._time_gradient_sync(getattr(self._trainer, "model_wrapped", None), args)

    def _time_gradient_sync(self, model: Any, args: TrainingArguments) -> None:
        """Time each rank's wait for the gradient all-reduce where the Trainer wrapped the model in
        DDP (it has by ``on_train_begin``), so STRAGGLER tells a rank with slow compute from the
        ranks that wait for it; a communication hook of the user's own is kept."""
        from torch.nn.parallel import DistributedDataParallel

        if not isinstance(model, DistributedDataParallel):
            return
        try:
            perfkit.torch.time_gradient_sync(model, registry=self.registry)
        except RuntimeError as exc:  # DDP takes one hook: the user's (PowerSGD, compression) stays
            if args.process_index == 0:
                say(
                    "perfkit: the DDP model already has a communication hook, kept as it is; each "
                    "rank's wait for the gradient all-reduce is not timed "
                    f"(PerfkitCallback(time_gradient_sync=False) says nothing): {exc}"
                )

    def _attach(self, trainer: Any, args: TrainingArguments) -> None:
        if self._trainer is not None or trainer is None:
            if trainer is None:
                say("perfkit: the Trainer could not be found from its callback: no data wait, no Trainer.log")
            return
        self._trainer = trainer
        self._undo.append(wrap_loaders(trainer, self._loader))
        if perfkit.torch.world_size() > 1:
            self.recorder.gather = self.ranks
            self.recorder.rank = int(args.process_index)
        publish = bool(args.process_index == 0)
        sinks: list[Sink] = [_TrainerLog(trainer)]
        path = self.run_path(args)
        if publish and path is not None:
            self._writer = RunWriter(path, prefix=self.prefix, meta={"framework": "transformers"})
            sinks.append(self._writer)
        self.monitor = StageMonitor(
            say=say,
            stages=self.stages,
            sinks=[*sinks, *self.sinks],
            prefix=self.prefix,
            console=self.console,
            publish=publish,
            step_of=lambda stage: int(self._trainer.state.global_step),
            is_open=self.recorder.is_open,
        )
        self.recorder.listeners.append(self.monitor)

    def run_path(self, args: TrainingArguments) -> Path | None:
        """Where the run directory is: ``run_dir``, else ``OUTPUT_DIR/perfkit-run`` (None: not saved)."""
        if not self.save_run:
            return None
        return Path(self.run_dir) if self.run_dir is not None else Path(args.output_dir or ".") / RUN_DIR_NAME

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
        rec = self.recorder
        items = iter(source)  # STAGE.data.wait and .data.iter come from the instrumented loader
        try:
            for item in items:
                if stage == "train":  # steps come from the Trainer's events (it fetches ahead)
                    rec.add_samples(stage, batch_size(item) or 0)
                    yield item
                    continue
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
        if not self.recorder.is_open(stage):
            epoch = self._epochs.get(stage, 0)
            self._epochs[stage] = epoch + 1
            self.recorder.begin(stage, epoch)

    def _end(self, stage: str) -> None:
        if self.recorder.is_open(stage):
            self.recorder.end(stage)

    # ---- train ----------------------------------------------------------------------------------

    def on_epoch_begin(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kw: Any
    ) -> None:
        self._begin("train")

    def on_step_begin(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kw: Any
    ) -> None:
        self.recorder.step_begin("train")

    def on_substep_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kw: Any
    ) -> None:
        self.recorder.step_end("train")  # a micro-batch ended; the next begins at once
        self.recorder.step_begin("train")

    def on_pre_optimizer_step(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kw: Any
    ) -> None:
        self._optimizer_t0 = self.registry.clock()

    def on_optimizer_step(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kw: Any
    ) -> None:
        if self._optimizer_t0 is not None:
            t0, self._optimizer_t0 = self._optimizer_t0, None
            self.recorder.record("train", optimizer_series("train"), t0, self.registry.clock())

    def on_step_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kw: Any
    ) -> None:
        self.recorder.step_end("train")

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
        if self.monitor is not None:
            self.monitor.finish(self._writer, self.registry.snapshot())
        if self._sampler is not None:
            release(self._sampler)
            self._sampler, self.recorder.sampler = None, None
