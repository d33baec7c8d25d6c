"""``HookClock``: Lightning's own profiler hook points, turned into stage-timeline events.

Lightning wraps every hook it runs in ``trainer.profiler.profile(name)``:
``[Callback]KEY.on_train_batch_end`` for each callback, ``run_training_batch`` around a
training step (forward, backward, optimizer), ``[Strategy]NAME.validation_step`` around an
evaluation step; inside a training step ``[Strategy]NAME.training_step``, ``...backward``,
``[LightningModule]NAME.optimizer_step`` (around the closure that runs the other two) and
``...optimizer_zero_grad`` delimit the step's parts. Wrapping ``trainer.profiler`` (the user's
profiler still gets every call) gives perfkit each callback's time and each step's own compute,
whatever order the callbacks are listed in: a callback before or after the monitor is timed the same way, and
a callback's hook inside a step (``on_before_backward``) is taken out of the step.

The model's own hooks (``[LightningModule]NAME.on_train_epoch_end``, those its class defines)
are timed the same way when they run outside a step (inside one they are the step's own
work: ``optimizer_step`` holds the whole of it); a checkpoint callback's hooks (saving
checkpoints) are told apart from other callbacks'; ``timed`` times a logger's methods (the
driver wraps them: Lightning does not profile loggers). A hook run inside another timed hook
(a callback that logs, ``on_save_checkpoint`` inside a checkpoint callback's save) is the
outer one's time, so no second is counted twice.

Only the names that matter are timed; Lightning's default profiler does nothing, so its
calls are answered by a shared empty context (cheaper than the ``@contextmanager`` that the
default profiler costs, about 1 µs a hook).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from types import TracebackType
from typing import Any

from lightning.pytorch import Callback, LightningModule, Trainer
from lightning.pytorch.callbacks import Checkpoint
from lightning.pytorch.profilers import PassThroughProfiler, Profiler

from perfkit.names import (
    BACKWARD,
    CHECKPOINT_HOOK,
    FORWARD,
    HOOK,
    LOGGER,
    MODULE_HOOK,
    OPTIMIZER,
    REST,
    ZERO_GRAD,
)
from perfkit.stages import StageRecorder

from ._lightning import overrides

PERFKIT = "perfkit"
"""The owner name of perfkit's own callbacks' hook time."""

_STEP_ACTIONS = {"validation_step": "val", "test_step": "test", "predict_step": "predict"}
PART = "part"
_PART_ACTIONS = {
    "[Strategy].training_step": FORWARD,  # inside the closure: the forward pass and the loss
    "[Strategy].backward": BACKWARD,
    "[LightningModule].optimizer_step": OPTIMIZER,  # around the closure: its own time is the optimizer's
    "[LightningModule].optimizer_zero_grad": ZERO_GRAD,
    "[LightningModule].configure_gradient_clipping": REST,  # inside optimizer_step, not the optimizer
}
"""Lightning's actions inside a training step that are its parts (``perfkit.stages.StepParts``),
by ``[KIND].hook``: with automatic optimization every part is one of these; with manual
optimization ``training_step`` holds the user's backward and optimizer step, which torch's own
hooks report (``perfkit.torch.time_step_parts``)."""


_NULL = contextlib.nullcontext()


class _Span:
    """One timed hook or step."""

    __slots__ = ("clock", "inner", "kind", "recorded", "subject", "t0")

    def __init__(self, clock: HookClock, kind: str, subject: str, inner: Any) -> None:
        self.clock, self.kind, self.subject, self.inner = clock, kind, subject, inner

    def __enter__(self) -> None:
        if self.inner is not None:
            self.inner.__enter__()
        clock = self.clock
        rec = clock.recorder
        if self.kind == "step":
            rec.step_begin(clock.stage_of(self.subject))
        elif self.kind == PART:
            rec.part_begin(self.subject)
        else:
            self.recorded = clock.opens(self.kind)
        self.t0 = rec.registry.clock()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        rec = self.clock.recorder
        if self.kind == "step":
            rec.step_end(self.clock.stage_of(self.subject), failed=exc_type is not None)
        elif self.kind == PART:
            rec.part_end(self.subject)
        elif self.recorded:
            self.clock.depth -= 1
            rec.hook(self.subject, self.t0, rec.registry.clock(), failed=exc_type is not None, kind=self.kind)
        if self.inner is not None:
            self.inner.__exit__(exc_type, exc, tb)


class HookClock(Profiler):
    """A profiler in front of the trainer's own: it times callbacks' hooks and steps into ``recorder``.

    ``ours`` tells perfkit's own callbacks (their time is perfkit's overhead, owner ``perfkit``;
    like any callback's, only the hooks their class defines are timed: perfkit's callbacks define
    none per step, and timing six empty hooks a step cost 7 µs, docs/performance.md);
    ``eval_stage`` says which stage an evaluation step belongs to now (``val`` or ``sanity``).
    """

    def __init__(
        self,
        inner: Profiler,
        recorder: StageRecorder,
        trainer: Trainer,
        *,
        ours: Callable[[Callback], bool],
        eval_stage: Callable[[str], str],
    ) -> None:
        super().__init__(dirpath=inner.dirpath, filename=inner.filename)
        self.inner = inner
        self.recorder = recorder
        self.trainer = trainer
        self._ours = ours
        self._eval_stage = eval_stage
        self._passthrough = type(inner) is PassThroughProfiler
        self._kinds: dict[str, tuple[str, str] | None] = {}
        self.depth = 0  # timed hooks open now: one inside another is the outer one's time
        self._thread = threading.get_ident()

    def stage_of(self, subject: str) -> str:
        return "train" if subject == "train" else self._eval_stage(subject)

    def opens(self, kind: str) -> bool:
        """Whether a hook of ``kind`` starting now is timed (and, if so, it is open from now)."""
        if self.depth or (kind == MODULE_HOOK and self.recorder.in_step()):
            return False  # inside a timed hook: the outer one's; the model's hook in its step: the step's
        if kind == LOGGER and threading.get_ident() != self._thread:
            return False  # a logger called from perfkit's background sink thread: not the loop's time
        self.depth += 1
        return True

    def timed(self, owner: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        """``fn`` (a logger's method) timed as ``owner``'s (``CLASS.METHOD``) logger time."""

        def call(*args: Any, **kwargs: Any) -> Any:
            if not self.opens(LOGGER):
                return fn(*args, **kwargs)
            rec = self.recorder
            t0, failed = rec.registry.clock(), True
            try:
                out = fn(*args, **kwargs)
                failed = False
                return out
            finally:
                self.depth -= 1
                rec.hook(owner, t0, rec.registry.clock(), failed=failed, kind=LOGGER)

        return call

    # ---- what Lightning calls -----------------------------------------------------------------

    def profile(self, action_name: str) -> Any:
        try:
            kind = self._kinds[action_name]
        except KeyError:
            kind = self._kinds[action_name] = self._classify(action_name)
        inner = None if self._passthrough else self.inner.profile(action_name)
        if kind is None:
            return _NULL if inner is None else inner
        return _Span(self, kind[0], kind[1], inner)

    def start(self, action_name: str) -> None:
        self.inner.start(action_name)

    def stop(self, action_name: str) -> None:
        self.inner.stop(action_name)

    def summary(self) -> str:
        return self.inner.summary()

    def describe(self) -> None:
        self.inner.describe()

    def setup(self, stage: str, local_rank: int | None = None, log_dir: str | None = None) -> None:
        self.inner.setup(stage, local_rank, log_dir)

    def teardown(self, stage: str | None) -> None:
        self.inner.teardown(stage)

    def __del__(self) -> None:
        # Lightning's Profiler.__del__ calls teardown(), which would reach the user's profiler: the
        # driver drops this clock in the callbacks' teardown, before Lightning calls describe() on
        # the user's profiler (a PyTorchProfiler torn down by then fails its summary). The clock
        # owns no stream of its own; the user's profiler is Lightning's to tear down.
        pass

    def __getattr__(self, name: str) -> Any:  # anything else a profiler has is the user's profiler's
        return getattr(self.__dict__["inner"], name)

    # ---- which actions are timed ----------------------------------------------------------------

    def _classify(self, name: str) -> tuple[str, str] | None:
        if name == "run_training_batch":
            return ("step", "train")
        part = _PART_ACTIONS.get(f"{name.partition(']')[0]}].{name.rpartition('.')[2]}")
        if part is not None:
            return (PART, part)
        if name.startswith("[Strategy]"):
            action = name.rpartition(".")[2]
            return ("step", _STEP_ACTIONS[action]) if action in _STEP_ACTIONS else None
        if name.startswith("[LightningModule]"):
            hook = name.rpartition(".")[2]
            if hook.endswith("_dataloader"):
                return None  # building a loader is the account's loader_setup, timed by the loop
            module = self.trainer.lightning_module
            mine = module is not None and overrides(module, hook, LightningModule)
            return (MODULE_HOOK, hook) if mine else None
        if not name.startswith("[Callback]"):
            return None
        key, _, hook = name[len("[Callback]") :].rpartition(".")
        callback = self._callback(key)
        if callback is None:
            return None
        if not overrides(callback, hook):
            return None  # an empty hook costs Lightning's dispatch, as any callback's does: not timed
        if self._ours(callback):
            return (HOOK, PERFKIT)
        return (CHECKPOINT_HOOK if isinstance(callback, Checkpoint) else HOOK, self._owner(callback))

    def _callback(self, key: str) -> Callback | None:
        for cb in self.trainer.callbacks:  # type: ignore[attr-defined]
            if cb.state_key == key:
                found: Callback = cb
                return found
        return None

    def _owner(self, callback: Callback) -> str:
        """The callback's class name; a second instance of a class is ``Name#2``."""
        name = type(callback).__name__
        same = [cb for cb in self.trainer.callbacks if type(cb) is type(callback)]  # type: ignore[attr-defined]
        index = next((i for i, cb in enumerate(same) if cb is callback), 0)
        return name if index == 0 else f"{name}#{index + 1}"
