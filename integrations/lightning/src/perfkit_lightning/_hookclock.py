"""``HookClock``: Lightning's own profiler hook points, turned into stage-timeline events.

Lightning wraps every hook it runs in ``trainer.profiler.profile(name)``:
``[Callback]KEY.on_train_batch_end`` for each callback, ``run_training_batch`` around a
training step (forward, backward, optimizer), ``[Strategy]NAME.validation_step`` around an
evaluation step. Wrapping ``trainer.profiler`` (the user's profiler still gets every call)
gives perfkit each callback's time and each step's own compute, whatever order the
callbacks are listed in: a callback before or after the monitor is timed the same way, and
a callback's hook inside a step (``on_before_backward``) is taken out of the step.

Only the names that matter are timed; Lightning's default profiler does nothing, so its
calls are answered by a shared empty context (cheaper than the ``@contextmanager`` that the
default profiler costs, about 1 µs a hook).
"""

from __future__ import annotations

from collections.abc import Callable
from types import TracebackType
from typing import Any

from lightning.pytorch import Callback, Trainer
from lightning.pytorch.profilers import PassThroughProfiler, Profiler

from perfkit.stages import StageRecorder

from ._lightning import overrides

PERFKIT = "perfkit"
"""The owner name of perfkit's own callbacks' hook time."""

_STEP_ACTIONS = {"validation_step": "val", "test_step": "test", "predict_step": "predict"}


class _Null:
    __slots__ = ()

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


_NULL = _Null()


class _Span:
    """One timed hook or step."""

    __slots__ = ("clock", "inner", "kind", "subject", "t0")

    def __init__(self, clock: HookClock, kind: str, subject: str, inner: Any) -> None:
        self.clock, self.kind, self.subject, self.inner = clock, kind, subject, inner

    def __enter__(self) -> None:
        if self.inner is not None:
            self.inner.__enter__()
        rec = self.clock.recorder
        if self.kind == "step":
            rec.step_begin(self.clock.stage_of(self.subject))
        self.t0 = rec.registry.clock()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        rec = self.clock.recorder
        if self.kind == "step":
            rec.step_end(self.clock.stage_of(self.subject), failed=exc_type is not None)
        else:
            rec.hook(self.subject, self.t0, rec.registry.clock(), failed=exc_type is not None)
        if self.inner is not None:
            self.inner.__exit__(exc_type, exc, tb)


class HookClock(Profiler):
    """A profiler in front of the trainer's own: it times callbacks' hooks and steps into ``recorder``.

    ``ours`` tells perfkit's own callbacks (their time is perfkit's overhead, owner ``perfkit``);
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

    def stage_of(self, subject: str) -> str:
        return "train" if subject == "train" else self._eval_stage(subject)

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

    def __getattr__(self, name: str) -> Any:  # anything else a profiler has is the user's profiler's
        return getattr(self.__dict__["inner"], name)

    # ---- which actions are timed ----------------------------------------------------------------

    def _classify(self, name: str) -> tuple[str, str] | None:
        if name == "run_training_batch":
            return ("step", "train")
        if name.startswith("[Strategy]"):
            action = name.rpartition(".")[2]
            return ("step", _STEP_ACTIONS[action]) if action in _STEP_ACTIONS else None
        if not name.startswith("[Callback]"):
            return None
        key, _, hook = name[len("[Callback]") :].rpartition(".")
        callback = self._callback(key)
        if callback is None:
            return None
        if self._ours(callback):
            return ("hook", PERFKIT)
        return ("hook", self._owner(callback)) if overrides(callback, hook) else None

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
