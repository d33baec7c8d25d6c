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

The block is one stage epoch of the script's ``Session`` (one per run, or per registry without
a run: training's time per sample, the other stages' reference, and the console's history are
the run's): on exit it becomes a ``StageWindow``,
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

import sys
import threading
from collections.abc import Generator, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, TypeVar

from .._iteration import timed_iter
from .._loader_names import loader_name
from .._registry import Registry, check_registry, current_registry
from .._state import SWITCH
from .._validate import check_int, check_name
from ..loaders import CpuSplit, record_settings
from ..run import RunWriter
from ..sinks import Failures, Sink, SinkFanout, check_sinks
from ..stages import (
    Gather,
    Intervals,
    StageListener,
    StageRecorder,
    StageWindow,
    check_listeners,
    stage_metrics,
)
from ._options import Options
from ._session import Host, Session

T = TypeVar("T")
SLOWEST = 5
"""Slowest steps kept per window, with their index in the loop."""


@dataclass
class ScriptRun:
    """A script's run: its session, the count of its windows (the default step), and what its
    windows' sinks lost (each kind of fault said once for all of them)."""

    session: Session
    owner: object  # the run's RunWriter, else the registry
    windows: int = 0
    failures: Failures = field(default_factory=Failures)

    def matches(self, owner: object, host: Host, console: bool) -> bool:
        mine = self.session.host
        return (
            self.owner is owner
            and (mine.rank, mine.gather) == (host.rank, host.gather)
            and self.session.options.console == bool(console)
        )


_CURRENT: list[ScriptRun] = []  # the script's run: at most one, replaced when a window names another
_LOCK = threading.Lock()


def script_run(
    *,
    run: RunWriter | None,
    registry: Registry | None,
    gather: Gather | None,
    rank: int | None,
    console: bool,
) -> ScriptRun:
    """The run a script's window belongs to: the last one, unless this window names another run
    (or registry), other ranks or another console; a new one carries training's time per sample.
    ``rank`` None is torch.distributed's where ``gather`` is given, else 0."""
    if gather is not None and not callable(gather):
        raise TypeError(f"gather must be callable or None (perfkit.torch.gather_ranks), got {gather!r}")
    if rank is None:
        rank = distributed_rank() if gather is not None else 0
    check_registry(registry)
    reg = registry or current_registry()
    owner = run if run is not None else reg
    host = Host(rank=check_int(rank, "rank"), gather=gather)
    with _LOCK:
        last = _CURRENT[0] if _CURRENT else None
        if last is not None and last.matches(owner, host, console):
            return last
        options = Options(
            registry=reg, console=bool(console), save_run=False, sample_resources=False, top_k_slowest=SLOWEST
        )
        carried = (
            last.session.recorder.train_s_per_sample if last is not None and last.owner is owner else None
        )
        made = ScriptRun(Session(options, host, train_s_per_sample=carried), owner)
        if last is not None:
            last.session.close()  # the run it replaces stops timing step parts
        _CURRENT[:] = [made]
        return made


class ScriptWindow(StageListener):
    """One stage epoch of a script, as ``perfkit.window`` returns it; see the module docstring.

    After the block, ``window`` is its ``StageWindow`` and ``metrics`` its metrics (both empty
    when perfkit is disabled: nothing is recorded or sent).
    """

    def __init__(
        self,
        run: ScriptRun,
        stage: str,
        *,
        epoch: int,
        sinks: Sequence[Sink] = (),
        writer: RunWriter | None = None,
        step: int | None = None,
        listeners: Sequence[StageListener] = (),
        intervals: Intervals | None = None,
    ) -> None:
        self.stage = check_name(stage, "stage")
        self.epoch = check_int(epoch, "epoch")
        if writer is not None and not isinstance(writer, RunWriter):
            raise TypeError(f"run must be a perfkit.run.RunWriter or None, got {writer!r}")
        self.sinks = [*([writer] if writer is not None else []), *check_sinks(sinks)]
        self.step = None if step is None else check_int(step, "step")
        self.listeners = check_listeners(listeners)
        if intervals is not None and not isinstance(intervals, Intervals):
            raise TypeError(f"intervals must be a perfkit.stages.Intervals or None, got {intervals!r}")
        self.intervals = intervals
        self.window: StageWindow | None = None
        self.metrics: dict[str, float] = {}
        self._run = run
        self._on = False
        self._entered = False
        self._loops: list[Generator[Any, None, None]] = []
        self._sources: list[object] = []  # the iterables iterate() was given, in order: their loader index

    @property
    def session(self) -> Session:
        """The session of the script's run."""
        return self._run.session

    def __enter__(self) -> ScriptWindow:
        if self._entered:
            raise RuntimeError(f"this {self.stage} window was already entered: make one per stage epoch")
        self._entered = True
        if SWITCH.on:
            self._on = True
            session = self.session
            for listener in (self, *self.listeners):
                session.add_listener(listener)
            session.begin(self.stage, self.epoch, intervals=self.intervals)
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
        if not self._on:
            return
        session = self.session
        try:
            session.end(self.stage)  # published inside it (stage_ended), while an enclosing window is paused
        finally:
            for listener in (self, *self.listeners):
                session.remove_listener(listener)

    def stage_ended(self, window: StageWindow) -> None:
        if window.stage != self.stage or self.window is not None:
            return
        self.window = window
        self.metrics = stage_metrics(window)
        run = self._run
        step = run.windows if self.step is None else self.step
        run.windows += 1
        if self.session.publish:  # the merged window is rank 0's to send
            SinkFanout(self.sinks, failures=run.failures).emit(window, self.metrics, step)

    def interval_ended(self, window: StageWindow) -> None:
        """An interval goes to the sinks under ``perf/interval/STAGE``, at its last step of the epoch."""
        if window.stage != self.stage or not self.session.publish or window.scope != "interval":
            return
        metrics = stage_metrics(window, prefix="perf/interval")
        step = window.steps[1] if window.steps is not None else 0
        SinkFanout(self.sinks, failures=self._run.failures).emit(window, metrics, step)

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
        if not self._on:
            return iter(iterable)
        rec = self.session.recorder
        if not hasattr(iterable, "__len__"):  # a stream: its epoch may never end, so cut it from the start
            rec.mark_long(self.stage)
        elif isinstance(steps := _length(iterable), int):  # a long epoch is cut once its pace says so
            rec.expect_steps(self.stage, steps)
        loop = self._timed(iterable, self._loader(iterable, rec), rec)
        self._loops.append(loop)
        return loop

    def add_samples(self, n: int) -> None:
        """Count ``n`` more samples in the window (for loops that ``iterate`` does not see)."""
        check_int(n, "n")
        if self._on:
            self.session.recorder.add_samples(self.stage, n)

    def _loader(self, iterable: object, rec: StageRecorder) -> str:
        """The loader name of ``iterable`` in this window: the stage's for the first one iterated."""
        index = next((i for i, x in enumerate(self._sources) if x is iterable), len(self._sources))
        if index == len(self._sources):
            self._sources.append(iterable)
        name = loader_name(self.stage, index)
        dataset = getattr(iterable, "dataset", None)
        if dataset is not None:
            rec.name_dataset(name, type(dataset).__name__)
        return name

    def _timed(self, iterable: Iterable[T], loader: str, rec: StageRecorder) -> Generator[T, None, None]:
        reg = self.session.registry
        items = timed_iter(iterable, loader, registry=reg)  # waits: LOADER.data.wait
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


def distributed_rank() -> int:
    """This process's rank in torch.distributed's process group, 0 without one (or without torch)."""
    dist = sys.modules.get("torch.distributed")
    if dist is None or not dist.is_available() or not dist.is_initialized():
        return 0
    return int(dist.get_rank())


def _length(iterable: object) -> int | None:
    """``len(iterable)``, None where it has none after all (a DataLoader over an IterableDataset)."""
    try:
        return len(iterable)  # type: ignore[arg-type]
    except TypeError:
        return None
