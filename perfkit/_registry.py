"""The registry: where records go, and where windows of them are read.

A ``Registry`` is a small composition, one module per part:

* its pending records (``_buffer.py``, shared with the compiled hot path): entry points append
  three ints per record (node, start, end), atomically, so threads record without a lock;
* the drain (``_drain.py``), in batches (past ``DRAIN_AT`` pending ints, and before every cursor
  or snapshot): numpy turns a batch into columns, groups them by series and appends them to
  each series' ring. That keeps the per-record cost to a tuple append, and bounded memory;
* its mailbox (``_mailbox.py``): records forwarded by, or received from, DataLoader workers;
* GPU timings not yet resolved (``_gpu_events.py``) and gauges (``_gauges.py``);
* cursors (``_cursor.py``): a ``Cursor`` remembers each series' running totals; a snapshot
  since a cursor takes differences, so a window's count and total are exact even when the ring
  overwrote some of its samples;
* what it dropped (``_dropped.py``: ``Losses``), by reason, for ``Snapshot.dropped``.

The registry owns the lock (drains, cursors and snapshots take it) and the life cycle: ``reset``,
and after ``fork()`` a child that starts clean. Nothing a caller hands over can poison it:
``record`` refuses a start or end that is not an int of nanoseconds, and a drain that meets one
anyway (a clock that misbehaves mid-run: None, NaN, a number past int64) drops it and counts it,
as it does for records past ``max_series`` distinct names and for paths past the node table's
bound (``dropped``).
"""

from __future__ import annotations

import itertools
import os
import threading
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from ._accel import configure
from ._buffer import DRAIN_AT, RegistryCore, take_all
from ._clock import Clock, monotonic_ns
from ._context import NODES, get_cell, new_cell
from ._cursor import Cursor as Cursor
from ._cursor import ThreadTable, gauge_windows, node_windows, recursion_windows, series_windows
from ._drain import SeriesTable, columns, known
from ._dropped import INVALID, OVER_CAP, Losses
from ._gauges import Gauges, check_value
from ._gpu_events import EventFactory, PendingGpu
from ._mailbox import OUTBOX_MAX, Mailbox
from ._ring import I64, Bools
from ._snapshot import Snapshot
from ._transfer import RecordBatch
from ._validate import check_int, check_name, check_time, name_prefix

MAX_CAPACITY = 10_000_000
"""Largest ``capacity``: a full ring of one series then holds 250 MB."""
MAX_SERIES = 1_000_000
"""Largest ``max_series``."""


_ALL: weakref.WeakSet[Registry] = weakref.WeakSet()
_BY_ID: weakref.WeakValueDictionary[int, Registry] = weakref.WeakValueDictionary()
_IDS = itertools.count(1)


class Registry(RegistryCore):
    """Bounded, thread-safe store of timing records.

    Each series (a name) keeps its newest ``capacity`` records (at most ``MAX_CAPACITY``) in a
    ring, plus exact running totals that are never lost when the ring overwrites. Past
    ``max_series`` distinct names, records of new names are dropped, counted per name prefix in
    ``dropped`` and warned about once. ``clock`` returns int nanoseconds.

    >>> import perfkit
    >>> reg = perfkit.Registry(capacity=1000)
    >>> for _ in range(3):
    ...     with perfkit.section("step", registry=reg):
    ...         pass
    >>> reg.snapshot()["step"].count
    3
    """

    __slots__ = (
        "__weakref__",
        "_gauges",
        "_generation",
        "_gpu",
        "_id",
        "_lock",
        "_lost",
        "_mail",
        "_pid",
        "_series",
        "_start_ns",
        "capacity",
        "gpu_events",
        "max_series",
    )

    def __init__(
        self,
        capacity: int = 10_000,
        *,
        clock: Clock | None = None,
        gpu_events: EventFactory | None = None,
        max_series: int = 10_000,
    ) -> None:
        self.capacity = check_int(capacity, "capacity", low=1, high=MAX_CAPACITY)
        self.max_series = check_int(max_series, "max_series", low=1, high=MAX_SERIES)
        if clock is not None and not callable(clock):
            raise TypeError(f"clock must be a callable returning nanoseconds, got {clock!r}")
        if gpu_events is not None and not callable(gpu_events):
            raise TypeError(f"gpu_events must be a callable returning CUDA events, got {gpu_events!r}")
        if clock is not None:
            check_time(clock(), "clock()")  # a clock of float seconds would make every record 0
        self.clock = clock or monotonic_ns
        self.gpu_events = gpu_events
        """Makes the events of ``cuda=True`` sections; None means torch.cuda's when CUDA is available."""
        self._buf = []
        self._generation = 0
        self._id = next(_IDS)
        self._pid = os.getpid()
        self._start_fresh()
        _ALL.add(self)
        _BY_ID[self._id] = self

    def _start_fresh(self) -> None:
        """Empty parts, a new lock: at construction, and in a forked child (whose parent's records are
        the parent's to report, and whose lock a parent thread may have held)."""
        self._lock = threading.RLock()
        self._lost = Losses(self.max_series)
        self._series = SeriesTable(self.capacity, self.max_series, self._lost)
        self._gauges = Gauges(self.capacity, self.max_series)
        self._mail = Mailbox()
        self._gpu = PendingGpu()
        self._start_ns = self.clock()

    def __repr__(self) -> str:
        return f"Registry(capacity={self.capacity}, series={len(self._series.rings)})"

    @property
    def key(self) -> tuple[int, int]:
        """(creating pid, id): names this registry in a forked child, whose copy has the same key."""
        return (self._pid, self._id)

    def record(self, name: str, start_ns: int, end_ns: int, *, error: bool = False) -> None:
        """Add one record measured elsewhere (times from ``self.clock``), nested in the open section.

        >>> import perfkit
        >>> reg = perfkit.Registry()
        >>> t0 = reg.clock(); reg.record("step", t0, t0 + 2_000_000)
        >>> reg.snapshot()["step"].total_s
        0.002
        """
        check_name(name)
        start_ns = check_time(start_ns, "start_ns")
        end_ns = check_time(end_ns, "end_ns")
        cell = get_cell(None) or new_cell()
        node = NODES.child(cell[0], name)
        buf = self._buf
        buf += (~node if error else node, start_ns, end_ns)
        if len(buf) > DRAIN_AT:
            self.drain()

    def gauge(self, name: str, value: float, *, t_ns: int | None = None) -> None:
        """Add one sample of gauge ``name`` (a memory size, a utilisation) taken at ``t_ns``.

        >>> import perfkit
        >>> reg = perfkit.Registry()
        >>> reg.gauge("gpu0.util_percent", 87.0)
        >>> reg.snapshot().gauges["gpu0.util_percent"].last
        87.0
        """
        check_name(name)
        t = self.clock() if t_ns is None else check_time(t_ns, "t_ns")
        sample = check_value(name, value)
        with self._lock:
            if not self._gauges.add(name, t, sample):
                self._lost.add(OVER_CAP + name_prefix(name), 1, name)

    def drain(self) -> None:
        """Move pending records into the rings (done for you before every cursor and snapshot)."""
        self._drain(wait_gpu=False)

    def _drain(self, *, wait_gpu: bool) -> None:
        with self._lock:
            if self._mail.inbox:
                self._mail.deliver(self.ingest, self._lost)
            if self._gpu.items:
                self._buf += self._gpu.resolve(wait=wait_gpu)
            batch = take_all(self)
            if batch is None:
                return
            flat, unreadable = batch
            self._lost.add(INVALID, unreadable)
            nodes, starts, durations, errors = columns(flat, self._lost)
            if len(nodes):
                self.ingest(nodes, starts, durations, errors)

    @property
    def dropped(self) -> dict[str, int]:
        """Records dropped since the start, by reason (``invalid records``, ``node table full``,
        ``past max_series: PREFIX``); see ``Snapshot.dropped`` for a window's."""
        with self._lock:
            self.drain()
            return dict(self._lost.counts)

    def ingest(self, nodes: I64, starts: I64, durations: I64, errors: Bools) -> None:
        """Append columns of records (oldest first) whose nodes are interned in this process."""
        with self._lock:
            if self._mail.outbox is not None:
                self._mail.keep(*known((nodes, starts, durations, errors), self._lost))
            else:
                self._series.add(nodes, starts, durations, errors)

    # Handing records to another process: a DataLoader worker forwards, the main process receives.

    def forward(self, max_records: int = OUTBOX_MAX) -> None:
        """Keep records for ``take_records()`` instead of aggregating them here (in a worker).

        Past ``max_records`` not yet taken, the newest are dropped and counted.
        """
        check_int(max_records, "max_records")
        with self._lock:
            self._mail.forward(max_records)

    def take_records(self) -> RecordBatch | None:
        """Everything recorded since the last call, ready to travel; None when there is nothing."""
        with self._lock:
            self._drain(wait_gpu=False)
            return self._mail.take()

    def receive(self, batch: RecordBatch) -> None:
        """Queue a worker's records; they join the registry at the next drain (no lock taken here)."""
        self._mail.inbox.append(batch)

    @property
    def dropped_in_transfer(self) -> int:
        """Records that workers had to drop before handing them over (exact, since the start)."""
        return self._mail.dropped_in

    def cursor(self) -> Cursor:
        """Mark the current point; a later ``snapshot(since=...)`` covers only what follows."""
        with self._lock:
            self._drain(wait_gpu=True)
            return Cursor(
                t_ns=self.clock(),
                registry_id=self._id,
                generation=self._generation,
                series={name: ring.marks() for name, ring in self._series.rings.items()},
                nodes={node: (m[0], m[1], m[2]) for node, m in self._series.nodes.items()},
                gauges=self._gauges.marks(),
                dropped_in_transfer=self.dropped_in_transfer,
                dropped=dict(self._lost.counts),
            )

    def snapshot(self, since: Cursor | None = None) -> Snapshot:
        """Statistics of every series over the records made after ``since`` (or since the start).

        A cursor taken before ``reset()`` covers everything since the reset.
        """
        if since is not None and (not isinstance(since, Cursor) or since.registry_id != self._id):
            raise ValueError(f"since must be a Cursor taken from this registry, got {since!r}")
        with self._lock:
            self._drain(wait_gpu=True)
            if since is not None and since.generation != self._generation:
                since = None
            end_ns = self.clock()
            threads = ThreadTable()
            series = series_windows(self._series.rings, since, threads)
            tree, per_thread, folded = node_windows(self._series.nodes, since, threads)
            return Snapshot(
                series,
                tree=tree,
                threads=threads.infos,
                thread_totals=per_thread,
                gauges=gauge_windows(self._gauges.rings, since),
                start_ns=since.t_ns if since else self._start_ns,
                end_ns=end_ns,
                dropped_in_transfer=self.dropped_in_transfer - (since.dropped_in_transfer if since else 0),
                dropped=self._lost.since(since),
                recursion=recursion_windows(self._series.rings, since, folded),
            )

    def reset(self) -> None:
        """Forget every record; cursors taken before now cover everything after the reset."""
        with self._lock:
            self.drain()
            self._series.clear()
            self._gauges.rings.clear()
            self._lost.counts.clear()
            self._generation += 1
            self._start_ns = self.clock()

    def _after_fork(self) -> None:
        # The child starts clean: the parent's records are the parent's to report.
        self._take_pending()
        self._start_fresh()
        self._generation += 1


def check_registry(registry: object) -> Registry | None:
    """The ``registry=`` argument every entry point takes: a Registry, or None for the current one."""
    if registry is not None and not isinstance(registry, Registry):
        raise TypeError(f"registry must be a perfkit.Registry or None, got {registry!r}")
    return registry


def _after_fork_in_child() -> None:
    for registry in list(_ALL):
        registry._after_fork()


os.register_at_fork(after_in_child=_after_fork_in_child)

DEFAULT = Registry()
_CURRENT: ContextVar[Registry] = ContextVar("perfkit_registry", default=DEFAULT)
current_registry = _CURRENT.get
configure(registry_var=_CURRENT, drain_at=DRAIN_AT, perf_counter=monotonic_ns)  # _buffer.CONFIGURED


def registry_by_key(key: tuple[int, int]) -> Registry | None:
    """The registry created in this process under ``key`` (see ``Registry.key``), if alive."""
    pid, rid = key
    return _BY_ID.get(rid) if pid == os.getpid() else None


def all_registries() -> list[Registry]:
    return list(_ALL)


def get_registry() -> Registry:
    """The registry entry points record into here: the innermost ``use_registry``, else the default.

    >>> import perfkit
    >>> perfkit.get_registry() is perfkit.get_registry()
    True
    """
    return _CURRENT.get()


@contextmanager
def use_registry(registry: Registry) -> Iterator[Registry]:
    """Send records made in this context (thread or task) to ``registry`` for the block's duration.

    >>> import perfkit
    >>> reg = perfkit.Registry()
    >>> with perfkit.use_registry(reg):
    ...     with perfkit.section("load"):
    ...         pass
    >>> list(reg.snapshot())
    ['load']
    """
    if not isinstance(registry, Registry):
        raise TypeError(f"registry must be a perfkit.Registry, got {registry!r}")
    token = _CURRENT.set(registry)
    try:
        yield registry
    finally:
        _CURRENT.reset(token)
