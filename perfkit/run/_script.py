"""``perfkit.window``: per-stage-epoch metrics from a plain training script, no framework needed.

    run = RunWriter("runs/exp1")
    sinks = [run, JsonlSink("runs/exp1/metrics.jsonl"), WandbSink()]
    loader = perfkit.torch.instrument(DataLoader(ds, num_workers=4), "train")   # optional
    for epoch in range(3):
        with perfkit.window("train", epoch=epoch, sinks=sinks) as w:
            for batch in w.iterate(loader):   # train.data.wait, train.step per batch
                train_step(batch)
        with perfkit.window("val", epoch=epoch, sinks=sinks) as w:
            for batch in w.iterate(val_loader):
                validate(batch)
    run.finish(perfkit.snapshot())

The block is one stage epoch of a ``StageRecorder``: on exit it becomes a ``StageWindow``,
its metrics (``perf/val/step_ms_p95``, ... as the Lightning integration logs them) go to
every sink through a ``SinkFanout`` (a sink that raises is warned about once; the block
itself is never affected), and ``w.metrics`` holds them. A loader instrumented under the
stage's name (``perfkit.torch.instrument(loader, "train")``) adds its workers' time.

In a job of several processes (``accelerate launch``, Lightning Fabric, ``torchrun``), give
every rank ``gather=perfkit.torch.gather_ranks`` and its ``rank``: each window's end is then one
collective that merges the ranks (``window.ranks`` holds each rank's account), so every rank
must open and close the same windows in the same order (a window only rank 0 enters waits for
the others forever). Every rank records and gets the merged ``w.metrics``; only rank 0 sends
them to the sinks and the run, so give the others ``run=None``.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, TypeVar

from .._iteration import timed_iter
from .._loader_facts import CpuSplit, record_settings
from .._registry import Registry, check_registry, current_registry
from .._state import SWITCH
from .._validate import check_int, check_name
from ..names import loader_name
from ..sinks import Failures, Sink, SinkFanout, check_sinks
from ..stages import Intervals, StageListener, StageRecorder, StageWindow, stage_metrics
from ._writer import RunWriter

T = TypeVar("T")
SLOWEST = 5
"""Slowest steps kept per window, with their index in the loop."""
Gather = Callable[[Any], Sequence[Any]]
"""Every rank's object, in rank order: ``perfkit.torch.gather_ranks``."""


@dataclass
class _Shared:
    """What windows of one run (or, without a run, one registry) share: training's time per sample
    (the other stages' reference), and the count of windows (the default step)."""

    recorder: StageRecorder
    windows: int = 0
    sink_failures: Failures = field(default_factory=Failures)


_SHARED: weakref.WeakKeyDictionary[object, _Shared] = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()


def _shared(owner: object, registry: Registry) -> _Shared:
    with _LOCK:
        state = _SHARED.get(owner)
        if state is None:
            state = _SHARED[owner] = _Shared(StageRecorder(registry, top_k_slowest=SLOWEST))
        return state


class ScriptWindow:
    """One stage epoch of a script, as ``perfkit.window`` returns it; see the module docstring.

    After the block, ``window`` is its ``StageWindow`` and ``metrics`` its metrics (both empty
    when perfkit is disabled: nothing is recorded or sent).
    """

    def __init__(
        self,
        stage: str,
        *,
        epoch: int,
        sinks: Sequence[Sink] = (),
        run: RunWriter | None = None,
        registry: Registry | None = None,
        step: int | None = None,
        listeners: Sequence[StageListener] = (),
        gather: Gather | None = None,
        rank: int = 0,
        intervals: Intervals | None = None,
    ) -> None:
        self.stage = check_name(stage, "stage")
        self.epoch = check_int(epoch, "epoch")
        if run is not None and not isinstance(run, RunWriter):
            raise TypeError(f"run must be a perfkit.run.RunWriter or None, got {run!r}")
        self.sinks = [*([run] if run is not None else []), *check_sinks(sinks)]
        check_registry(registry)
        self.run = run
        self.registry = registry or current_registry()
        self.step = None if step is None else check_int(step, "step")
        self.listeners = _check_listeners(listeners)
        if gather is not None and not callable(gather):
            raise TypeError(f"gather must be callable or None (perfkit.torch.gather_ranks), got {gather!r}")
        self.gather = gather
        self.rank = check_int(rank, "rank")
        if intervals is not None and not isinstance(intervals, Intervals):
            raise TypeError(f"intervals must be a perfkit.stages.Intervals or None, got {intervals!r}")
        self.intervals = intervals
        self.window: StageWindow | None = None
        self.metrics: dict[str, float] = {}
        self._shared: _Shared | None = None
        self._entered = False
        self._loops: list[Generator[Any, None, None]] = []
        self._sender: _SendIntervals | None = None
        self._sources: list[object] = []  # the iterables iterate() was given, in order: their loader index

    def __enter__(self) -> ScriptWindow:
        if self._entered:
            raise RuntimeError(f"this {self.stage} window was already entered: make one per stage epoch")
        self._entered = True
        if SWITCH.on:
            self._shared = _shared(self.run if self.run is not None else self.registry, self.registry)
            recorder = self._shared.recorder
            recorder.gather, recorder.rank = self.gather, self.rank
            recorder.intervals = self.intervals
            if self.intervals is not None:
                self._sender = _SendIntervals(self, self._shared)
                recorder.listeners.append(self._sender)
            recorder.listeners += [x for x in self.listeners if x not in recorder.listeners]
            recorder.begin(self.stage, self.epoch)
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        for loop in self._loops:  # a loop left by break or by an exception ends its last step now
            loop.close()
        # The window is done with the user's loaders: held on, they would live as long as the
        # window, and a DataLoader iterator freed by the cycle collector (not as the loop ends)
        # waits 5 s for each persistent worker before torch terminates it.
        self._loops.clear()
        self._sources.clear()
        shared = self._shared
        if shared is None:
            return
        publish = _Publish(self, shared)  # while an enclosing window is still paused
        shared.recorder.listeners.append(publish)
        try:
            shared.recorder.end(self.stage)
        finally:
            gone = (publish, *self.listeners, *([self._sender] if self._sender is not None else []))
            shared.recorder.listeners[:] = [x for x in shared.recorder.listeners if x not in gone]
            self._sender = None  # it points back at this window: no cycle left for the collector

    def _publish(self, window: StageWindow, shared: _Shared) -> None:
        self.window = window
        self.metrics = stage_metrics(window)
        step = shared.windows if self.step is None else self.step
        shared.windows += 1
        if self.rank != 0:  # the merged window is rank 0's to send
            return
        SinkFanout(self.sinks, failures=shared.sink_failures).emit(window, self.metrics, step)

    def iterate(self, iterable: Iterable[T]) -> Iterator[T]:
        """Yield the items of ``iterable``, recording ``STAGE.data.wait`` and ``STAGE.step`` for each.

        The step is the loop body: from handing an item out to the request for the next one.
        Each item's samples are the first dimension of the first array (an object with a
        ``.shape``) found in it, dicts, lists, tuples and dataclasses searched depth first.
        A second loader iterated in the same window (two validation sets) is a loader of its own,
        ``STAGE/1``, with its own wait and steps in the account (``Account.loaders``).
        """
        if not self._entered or self.window is not None:
            raise RuntimeError("iterate() belongs inside the window's with block")
        if not isinstance(iterable, Iterable) and not hasattr(iterable, "__getitem__"):
            raise TypeError(f"iterable must be iterable, got {iterable!r} of type {type(iterable).__name__}")
        if self._shared is None:
            return iter(iterable)
        if not hasattr(iterable, "__len__"):  # a stream: its epoch may never end, so cut it from the start
            self._shared.recorder.mark_long(self.stage)
        elif isinstance(steps := _length(iterable), int):  # a long epoch is cut once its pace says so
            self._shared.recorder.expect_steps(self.stage, steps)
        loop = self._timed(iterable, self._loader(iterable, self._shared.recorder), self._shared.recorder)
        self._loops.append(loop)
        return loop

    def add_samples(self, n: int) -> None:
        """Count ``n`` more samples in the window (for loops that ``iterate`` does not see)."""
        check_int(n, "n")
        if self._shared is not None:
            self._shared.recorder.add_samples(self.stage, n)

    def _loader(self, iterable: object, rec: StageRecorder) -> str:
        """The loader name of ``iterable`` in this window: the stage's for the first one iterated."""
        index = next((i for i, x in enumerate(self._sources) if x is iterable), len(self._sources))
        if index == len(self._sources):
            self._sources.append(iterable)
        name = loader_name(self.stage, index)
        dataset = getattr(iterable, "dataset", None)
        if dataset is not None:
            rec.datasets[name] = type(dataset).__name__
        return name

    def _timed(self, iterable: Iterable[T], loader: str, rec: StageRecorder) -> Generator[T, None, None]:
        items = timed_iter(iterable, loader, registry=self.registry)  # waits: LOADER.data.wait
        reg = self.registry or current_registry()
        record_settings(reg, loader, iterable)
        cpu = CpuSplit(loader)  # what the waits and the steps cost in CPU: the advice's bounds
        try:
            while True:
                cpu.wait_started(reg)
                try:
                    item = next(items)
                except StopIteration:
                    return
                cpu.wait_ended(reg)
                rec.step_begin(self.stage)
                try:
                    yield item
                finally:
                    rec.step_end(self.stage, batch=item)
        finally:
            items.close()


class _Publish(StageListener):
    """Makes a script window's metrics and sends them when its stage ends: inside the recorder's
    publishing, so a window run inside another's step (validation in the middle of a training
    loop) costs that step nothing."""

    def __init__(self, owner: ScriptWindow, shared: _Shared) -> None:
        self.owner, self.shared = owner, shared

    def stage_ended(self, window: StageWindow) -> None:
        if window.stage == self.owner.stage:
            self.owner._publish(window, self.shared)


class _SendIntervals(StageListener):
    """Sends a script window's intervals while its stage runs (``_Publish`` joins only at its end)."""

    def __init__(self, owner: ScriptWindow, shared: _Shared) -> None:
        self.owner, self.shared = owner, shared

    def interval_ended(self, window: StageWindow) -> None:
        """An interval goes to the sinks under ``perf/interval/STAGE``, at its last step of the epoch."""
        owner = self.owner
        if window.stage != owner.stage or owner.rank != 0 or window.scope != "interval":
            return
        metrics = stage_metrics(window, prefix="perf/interval")
        step = window.steps[1] if window.steps is not None else 0
        SinkFanout(owner.sinks, failures=self.shared.sink_failures).emit(window, metrics, step)


def window(
    stage: str,
    *,
    epoch: int,
    sinks: Sequence[Sink] = (),
    run: RunWriter | None = None,
    registry: Registry | None = None,
    step: int | None = None,
    listeners: Sequence[StageListener] = (),
    gather: Gather | None = None,
    rank: int = 0,
    intervals: Intervals | None = None,
) -> ScriptWindow:
    """One stage epoch of a plain script: metrics to ``run`` and ``sinks`` when the block ends.

    ``step`` is what sinks get as the step (default: a counter of the run's windows);
    ``listeners`` follow the stage epoch as it runs (``perfkit.torch.ProfilerWindows``);
    ``gather`` merges the ranks of a job of several processes, ``rank`` is this one's (only
    rank 0 sends: see the module docstring). ``intervals`` (a ``perfkit.stages.Intervals``) cuts a
    long epoch into interval windows while it runs, sent under ``perf/interval/STAGE`` at their
    last step (a loop over a stream without a length is cut from the start; others once long).
    Training's time per sample is remembered per run (per registry without one) as the
    reference of the other stages' ``time_per_sample_vs_train_ratio``.

    >>> import perfkit, numpy as np
    >>> reg = perfkit.Registry()
    >>> with window("val", epoch=0, registry=reg) as w:
    ...     for batch in w.iterate([np.zeros((2, 8)), np.zeros((2, 8))]):
    ...         pass
    >>> w.metrics["perf/val/steps"], w.metrics["perf/val/samples"]
    (2.0, 4.0)
    """
    return ScriptWindow(
        stage,
        epoch=epoch,
        sinks=sinks,
        run=run,
        registry=registry,
        step=step,
        listeners=listeners,
        gather=gather,
        rank=rank,
        intervals=intervals,
    )


def _length(iterable: object) -> int | None:
    """``len(iterable)``, None where it has none after all (a DataLoader over an IterableDataset)."""
    try:
        return len(iterable)  # type: ignore[arg-type]
    except TypeError:
        return None


def _check_listeners(listeners: object) -> tuple[StageListener, ...]:
    if isinstance(listeners, StageListener) or not isinstance(listeners, Iterable):
        raise TypeError(f"listeners must be a list of StageListeners, got {listeners!r}")
    out = tuple(listeners)
    for x in out:
        if not isinstance(x, StageListener):
            raise TypeError(f"listeners: {x!r} is not a perfkit.stages.StageListener")
    return out
