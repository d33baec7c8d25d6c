"""``timed_iter``: how long a loop waits for each item, and how long each turn takes.

    for batch in perfkit.timed_iter(loader, "train"):
        step(batch)

records, per item, ``train.data.wait``: the time ``next()`` blocked (the consumer
waiting for the DataLoader), and ``train.loop.turn``: the time from one request for
an item to the next (wait plus the loop's body). ``iter()`` on the source (where a
DataLoader starts its workers) is recorded once as ``train.data.iter``, and the last
``next()``, which says the source is done (where a DataLoader without persistent workers
shuts them down: tens of ms the loop still waits), as ``train.data.end``. The names are
the loader's (see ``perfkit.names``), so ``perfkit.torch.instrument(loader, "train")``
and ``perfkit.window("train")`` meet the same series.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sized
from functools import partial
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from ._accel import SPEEDUPS, configure
from ._buffer import DRAIN_AT, add_record
from ._context import NODES, get_cell, new_cell
from ._registry import Registry, check_registry, current_registry
from ._state import SWITCH
from ._validate import check_name
from .names import end_series, iter_series, turn_series, wait_series

T = TypeVar("T")


class _PyIterCore:
    """A timed iterator's fields and its ``__next__`` (compiled in ``_speedups`` where it is built,
    which hands every case but the common one to this method)."""

    __slots__ = ("_it", "_last", "_registry", "_source", "_turn", "_turn_kids", "_wait", "_wait_kids", "name")

    name: str
    _it: Iterator[Any]
    _last: int | None
    _registry: Registry | None
    _source: Iterable[Any]
    _wait: str
    _turn: str
    _wait_kids: dict[int, int]
    _turn_kids: dict[int, int]

    def __next__(self) -> Any:
        # The recording is inlined, as in timed's wrapper: a helper call would cost ~60 ns per item.
        if not SWITCH.on:
            self._last = None
            return next(self._it)
        if SWITCH.tracer is not None:  # inside a profiler window: the wait is a named range too
            return record_wait(partial(_next_in_window, self), self.name, self._registry)
        reg = self._registry or current_registry()
        cell = get_cell(None) or new_cell()
        parent = cell[0]
        node = self._wait_kids.get(parent) or NODES.child(parent, self._wait)
        clock = reg.clock
        t0 = clock()
        cell[0] = node
        try:
            item = next(self._it)
        except StopIteration:
            cell[0] = parent
            _end_turn(self, reg, parent, t0)
            _record_end(self, parent, t0)
            raise
        except BaseException:
            cell[0] = parent
            add_record(reg, node, t0, clock(), failed=True)
            raise
        cell[0] = parent
        t1 = clock()
        buf = reg._buf
        last = self._last
        if last is None:
            buf += (node, t0, t1)
        else:
            # Turns overlap the waits and the loop body: their node stays out of the section tree.
            turn = self._turn_kids.get(parent) or NODES.child(parent, self._turn, overlay=True)
            buf += (node, t0, t1, turn, last, t0)
        self._last = t0
        if len(buf) > DRAIN_AT:
            reg.drain()
        return item


def _next_in_window(it: _PyIterCore) -> Any:
    reg = it._registry or current_registry()
    t0 = reg.clock()
    try:
        item = next(it._it)
    except StopIteration:
        parent = (get_cell(None) or new_cell())[0]
        _end_turn(it, reg, parent, t0)
        _record_end(it, parent, t0)
        raise
    if it._last is not None:
        parent = (get_cell(None) or new_cell())[0]
        add_record(reg, NODES.child(parent, it._turn, overlay=True), it._last, t0, failed=False)
    it._last = t0
    return item


def _record_end(it: _PyIterCore, parent: int, t0: int) -> None:
    """The source's last ``next()`` (from ``t0``, now ended by ``StopIteration``), as
    ``NAME.data.end``; the compiled path hands it here too (once a loop: no fast path needed)."""
    reg = it._registry or current_registry()
    add_record(reg, NODES.child(parent, end_series(it.name)), t0, reg.clock(), failed=False)


def _end_turn(it: _PyIterCore, reg: Registry, parent: int, t_end: int) -> None:
    if it._last is not None:
        reg._buf += (NODES.child(parent, it._turn, overlay=True), it._last, t_end)
        it._last = None


if TYPE_CHECKING:
    _IterCore = _PyIterCore
else:
    _IterCore = _PyIterCore if SPEEDUPS is None else SPEEDUPS.IterCore
configure(iter_next=_PyIterCore.__next__, iter_end=_record_end)


class TimedIterator(_IterCore, Iterator[T], Generic[T]):
    """The iterator ``timed_iter`` returns; ``close()`` records the last turn and closes the source."""

    __slots__ = ()

    def __init__(self, iterable: Iterable[T], name: str, registry: Registry | None) -> None:
        self.name = name
        self._source = iterable
        self._registry = registry
        self._wait = wait_series(name)
        self._turn = turn_series(name)
        self._wait_kids = NODES.kids(self._wait)
        self._turn_kids = NODES.kids(self._turn, overlay=True)
        self._last = None
        self._it = record_iter(lambda: iter(iterable), name, registry) if SWITCH.on else iter(iterable)

    @property
    def wait_name(self) -> str:
        """Series of the time each ``next()`` blocked."""
        return self._wait

    @property
    def turn_name(self) -> str:
        """Series of the time from one request for an item to the next."""
        return self._turn

    def __iter__(self) -> TimedIterator[T]:
        return self

    def close(self) -> None:
        """Record the turn in progress (a loop that broke out early) and close the source."""
        if self._last is not None and SWITCH.on:
            reg = self._registry or current_registry()
            cell = get_cell(None) or new_cell()
            _end_turn(self, reg, cell[0], reg.clock())
        self._last = None
        close = getattr(self._it, "close", None)
        if callable(close):
            close()

    def __length_hint__(self) -> int:
        try:
            return len(self._source)  # type: ignore[arg-type]
        except TypeError:
            return 0


class SizedTimedIterator(TimedIterator[T]):
    """A ``TimedIterator`` over a source with a length: ``len()`` is the source's."""

    __slots__ = ()

    def __len__(self) -> int:
        return len(self._source)  # type: ignore[arg-type]


def record_wait(next_item: Callable[[], T], name: str, registry: Registry | None) -> T:
    """Get one item with ``next_item()``, recorded as a wait of loader ``name`` (``NAME.data.wait``).

    Work done in this process meanwhile (a loader without workers) nests under the wait; inside
    a profiler window the wait is also a named range. The call that raises ``StopIteration`` is
    no wait for an item: it is ``NAME.data.end`` (the loader's last call, workers shutting down).
    What every loader wrapper that is not ``timed_iter`` times with.
    """
    return _record_span(next_item, wait_series(name), registry, item=True, end=end_series(name))


def record_iter(start: Callable[[], T], name: str, registry: Registry | None) -> T:
    """``start()`` (``iter()`` on a loader: where a DataLoader starts its workers), recorded as
    ``NAME.data.iter``; what starting the loader records here (no workers) nests under it."""
    return _record_span(start, iter_series(name), registry, item=False)


def _record_span(
    call: Callable[[], T], series: str, registry: Registry | None, *, item: bool, end: str | None = None
) -> T:
    """``call()`` recorded as one ``series`` record, with what it records nested under it.

    Inside an open record of the same series (a loader timed twice: ``timed_iter`` over one
    instrumented with ``time_wait``) it is left to the outer one. ``item``: a wait for an item,
    also a named range inside profiler windows; its ``StopIteration`` (the source is done) is
    recorded as ``end`` instead (not at all without one).
    """
    reg = registry or current_registry()
    cell = get_cell(None) or new_cell()
    parent = cell[0]
    if NODES.names[parent] == series:
        return call()
    node = NODES.kids(series).get(parent) or NODES.child(parent, series)
    t0 = reg.clock()  # before the cell changes: a clock that raises leaves the nesting as it was
    cell[0] = node
    tracer = SWITCH.tracer if item else None
    handle = tracer.begin(series) if tracer is not None else None
    failed, done = True, False
    try:
        result = call()
        failed = False
        return result
    except StopIteration:
        done = item
        if done and end is not None:
            node, done = NODES.child(parent, end), False
            failed = False
        raise
    finally:
        cell[0] = parent
        if tracer is not None:
            tracer.end(handle)
        if not done:
            add_record(reg, node, t0, reg.clock(), failed=failed)


def timed_iter(iterable: Iterable[T], name: str, *, registry: Registry | None = None) -> TimedIterator[T]:
    """Yield the items of ``iterable``, recording ``NAME.data.wait`` and ``NAME.loop.turn`` per item.

    ``iter()`` on the source is recorded as ``NAME.data.iter``; ``len()`` works when the source
    has one; closing the iterator closes the source. ``name`` is the loader's name, usually its
    stage (``"train"``, ``"val"``).

    >>> import perfkit
    >>> reg = perfkit.Registry()
    >>> items = perfkit.timed_iter([1, 2, 3], "loader", registry=reg)
    >>> len(items), list(items)
    (3, [1, 2, 3])
    >>> snap = reg.snapshot()
    >>> snap["loader.data.wait"].count, snap["loader.loop.turn"].count
    (3, 3)
    """
    name = check_name(name)
    check_registry(registry)
    if not isinstance(iterable, Iterable) and not hasattr(iterable, "__getitem__"):
        raise TypeError(f"iterable must be iterable, got {iterable!r} of type {type(iterable).__name__}")
    if isinstance(iterable, Sized):
        return SizedTimedIterator(iterable, name, registry)
    return TimedIterator(iterable, name, registry)
