"""``perfkit.window``: per-phase-epoch metrics from a plain training script, no framework needed.

    run = perfkit.RunWriter("runs/exp1")
    sinks = [perfkit.JsonlSink("runs/exp1/metrics.jsonl"), perfkit.WandbSink()]
    for epoch in range(3):
        with perfkit.window("train", epoch=epoch, sinks=sinks, run=run) as w:
            for batch in w.iterate(train_loader):   # train.data.wait and train.step per batch
                train_step(batch)
        with perfkit.window("val", epoch=epoch, sinks=sinks, run=run) as w:
            for batch in w.iterate(val_loader):
                validate(batch)
    run.finish(perfkit.snapshot())

The block is one phase epoch: on exit its records become a ``PhaseWindow``, its metrics
(``perf/val/step_ms_p95``, ... as the Lightning integration logs them) go to the run
directory and every sink, and ``w.metrics`` holds them. A sink that raises is warned about
once; the block itself is never affected. Wrap the loader with ``perfkit.torch.instrument(
loader, perfkit.data_series("train"))`` to get its DataLoader workers' time too.
"""

from __future__ import annotations

import dataclasses
import threading
import weakref
from collections.abc import Generator, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, TypeVar

from ._phases import PhaseWindow, SlowStep, data_series, keep_slowest, phase_metrics, step_series
from ._registry import Registry, check_registry, current_registry
from ._rundir import RunWriter
from ._sinks import Sink
from ._state import SWITCH
from ._validate import check_name
from ._warn import WarnOnce
from ._window import Window

T = TypeVar("T")
SLOWEST = 5
"""Slowest steps kept per window, with their index in the loop."""


@dataclass
class _RunState:
    """What windows of one run (or, without a run, one registry) share."""

    windows: int = 0
    train_s_per_sample: float | None = None
    warn: WarnOnce = field(default_factory=WarnOnce)


_STATES: weakref.WeakKeyDictionary[object, _RunState] = weakref.WeakKeyDictionary()
_STATES_LOCK = threading.Lock()


def _state(owner: object) -> _RunState:
    with _STATES_LOCK:
        state = _STATES.get(owner)
        if state is None:
            state = _STATES[owner] = _RunState()
        return state


class ScriptWindow:
    """One phase epoch of a script, as ``perfkit.window`` returns it; see the module docstring.

    After the block, ``window`` is its ``PhaseWindow`` and ``metrics`` its metrics.
    """

    def __init__(
        self,
        phase: str,
        *,
        epoch: int,
        sinks: Sequence[Sink] = (),
        run: RunWriter | None = None,
        registry: Registry | None = None,
        step: int | None = None,
    ) -> None:
        self.phase = check_name(phase, "phase")
        self.epoch = _non_negative(epoch, "epoch")
        self.sinks = _check_sinks(sinks)
        if run is not None and not isinstance(run, RunWriter):
            raise TypeError(f"run must be a perfkit.RunWriter or None, got {run!r}")
        check_registry(registry)
        self.run = run
        self.registry = registry or current_registry()
        self.step = None if step is None else _non_negative(step, "step")
        self.window: PhaseWindow | None = None
        self.metrics: dict[str, float] = {}
        self._open: Window | None = None
        self._samples = 0
        self._slowest: list[tuple[int, int]] = []  # a min-heap of (duration_ns, batch index)
        self._loops: list[Generator[Any, None, None]] = []

    def __enter__(self) -> ScriptWindow:
        if self._open is not None:
            raise RuntimeError(f"this {self.phase} window was already entered: make one per phase epoch")
        self._open = Window(self.registry)
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        assert self._open is not None
        for loop in self._loops:  # a loop left by break or by an exception ends its last step now
            loop.close()
        snapshot = self._open.close()
        slowest = sorted(self._slowest, reverse=True)
        self.window = PhaseWindow(
            self.phase,
            self.epoch,
            snapshot,
            wall_s=self._open.wall_s,
            samples=self._samples or None,
            slowest=tuple(SlowStep(self.phase, self.epoch, i, 0, ns / 1e9) for ns, i in slowest),
        )
        self._publish(self.window, _state(self.run if self.run is not None else self.registry))

    def _publish(self, window: PhaseWindow, state: _RunState) -> None:
        reference = None if self.phase == "train" else state.train_s_per_sample
        self.metrics = phase_metrics(window, reference_s_per_sample=reference)
        if self.phase == "train" and window.s_per_sample is not None:
            state.train_s_per_sample = window.s_per_sample
        step = state.windows if self.step is None else self.step
        state.windows += 1
        if self.run is not None:
            self.run.add_window(window, self.metrics, step=step)
        for sink in self.sinks:
            try:
                sink.emit(window, self.metrics, step)
            except Exception as exc:  # a sink that is down must not stop the script
                name = type(sink).__name__
                state.warn(f"sink:{name}:{type(exc).__name__}", f"perfkit: {name}.emit failed: {exc!r}")

    def iterate(self, iterable: Iterable[T]) -> Iterator[T]:
        """Yield the items of ``iterable``, recording ``PHASE.data.wait`` and ``PHASE.step`` for each.

        The step is the loop body: from handing an item out to the request for the next one.
        Each item's samples are the first dimension of the first array (an object with a
        ``.shape``) found in it, dicts, lists, tuples and dataclasses searched depth first.
        """
        if self._open is None or self.window is not None:
            raise RuntimeError("iterate() belongs inside the window's with block")
        if not isinstance(iterable, Iterable) and not hasattr(iterable, "__getitem__"):
            raise TypeError(f"iterable must be iterable, got {iterable!r} of type {type(iterable).__name__}")
        loop = self._timed(iterable) if SWITCH.on else self._counted(iterable)
        self._loops.append(loop)
        return loop

    def add_samples(self, n: int) -> None:
        """Count ``n`` more samples in the window (for loops that ``iterate`` does not see)."""
        self._samples += _non_negative(n, "n")

    def _counted(self, iterable: Iterable[T]) -> Generator[T, None, None]:
        for item in iterable:
            self._samples += batch_size(item) or 0
            yield item

    def _timed(self, iterable: Iterable[T]) -> Generator[T, None, None]:
        reg, clock = self.registry, self.registry.clock
        wait, step = data_series(self.phase) + ".wait", step_series(self.phase)
        index = 0
        t0 = clock()
        it = iter(iterable)  # a DataLoader starts its workers here: part of the first batch's wait
        while True:
            try:
                item = next(it)
            except StopIteration:
                return
            except BaseException:
                reg.record(wait, t0, clock(), error=True)
                raise
            t1 = clock()
            reg.record(wait, t0, t1)
            self._samples += batch_size(item) or 0
            try:
                yield item
            finally:
                t0 = clock()  # the step ends where the wait for the next item begins
                reg.record(step, t1, t0)
                self._note(t0 - t1, index)
            index += 1

    def _note(self, ns: int, index: int) -> None:
        keep_slowest(self._slowest, (ns, index), SLOWEST)


def window(
    phase: str,
    *,
    epoch: int,
    sinks: Sequence[Sink] = (),
    run: RunWriter | None = None,
    registry: Registry | None = None,
    step: int | None = None,
) -> ScriptWindow:
    """One phase epoch of a plain script: metrics to ``run`` and ``sinks`` when the block ends.

    ``step`` is what sinks get as the step (default: a counter of the run's windows).
    Training's time per sample is remembered per run (per registry without one) as the
    reference of the other phases' ``time_per_sample_vs_train_ratio``.

    >>> import perfkit
    >>> reg = perfkit.Registry()
    >>> with perfkit.window("val", epoch=0, registry=reg) as w:
    ...     for batch in w.iterate([[1, 2], [3, 4]]):
    ...         pass
    >>> w.metrics["perf/val/steps"]
    2.0
    """
    return ScriptWindow(phase, epoch=epoch, sinks=sinks, run=run, registry=registry, step=step)


def batch_size(batch: Any, *, of: type | tuple[type, ...] | None = None, _depth: int = 0) -> int | None:
    """The first dimension of the first array in ``batch`` (dicts, lists, tuples, dataclasses searched
    depth first), or None. ``of`` restricts what counts as an array (a Lightning batch: tensors only,
    so the numpy polygons of an OCR batch are not taken for its size).

    It stops at the first array: walking a whole batch of hundreds of polygons at every step would
    cost more than the rest of a step's instrumentation.

    >>> import numpy as np
    >>> batch_size({"image": np.zeros((8, 3)), "label": [0] * 8})
    8
    """
    if of is None or isinstance(batch, of):
        shape = getattr(batch, "shape", None)
        if isinstance(shape, Sequence) and len(shape) >= 1:
            return int(shape[0])
    if _depth > 8:
        return None
    if isinstance(batch, Mapping):
        items: Iterable[Any] = batch.values()
    elif isinstance(batch, (list, tuple)):
        items = batch
    elif dataclasses.is_dataclass(batch) and not isinstance(batch, type):
        items = (getattr(batch, f.name) for f in dataclasses.fields(batch))
    else:
        return None
    for item in items:
        n = batch_size(item, of=of, _depth=_depth + 1)
        if n is not None:
            return n
    return None


def _non_negative(value: object, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{name} must be an int >= 0, got {value!r}")
    return value


def _check_sinks(sinks: object) -> tuple[Sink, ...]:
    if hasattr(sinks, "emit") or not isinstance(sinks, Iterable):
        raise TypeError(f"sinks must be a list of sinks, got {sinks!r}: pass [sink]")
    out = tuple(sinks)
    for s in out:
        if not callable(getattr(s, "emit", None)):
            raise TypeError(f"sinks: {s!r} has no emit(window, metrics, step) method")
    return out
