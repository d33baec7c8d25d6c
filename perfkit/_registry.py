"""The registry: where records go, and where windows of them are read.

Entry points append three ints per record (node, start, end) to one shared
list, an operation the interpreter performs atomically, so threads record
without a lock. The list is drained in batches (when it grows past a few
thousand records, and before every cursor or snapshot): numpy turns a batch
into columns, groups them by series and appends them to each series' ring.
That keeps the per-record cost to a tuple append, and bounded memory.

A ``Cursor`` remembers each series' running totals; a snapshot since a cursor
takes differences, so a window's count and total are exact even when the ring
overwrote some of its samples.

Nothing a caller hands over can poison the registry: ``record`` refuses a start or
end that is not an int of nanoseconds, and a drain that meets one anyway (a clock that
misbehaves mid-run: None, NaN, a number past int64) drops it and counts it, as it does
for records past ``max_series`` distinct names and for paths past the node table's
bound (``dropped``).
"""

from __future__ import annotations

import itertools
import math
import os
import threading
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING

import numpy as np

from ._accel import SPEEDUPS, configure
from ._clock import Clock, monotonic_ns
from ._context import NODES, OVERFLOW, get_cell, new_cell
from ._gauges import GaugeRing
from ._gpu_events import EventFactory, PendingGpu
from ._ring import I64, Bools, Ring
from ._snapshot import Snapshot
from ._transfer import OUTBOX_MAX, Mailbox, RecordBatch, unpack
from ._validate import TIME_LIMIT, check_int, check_name, check_time, name_prefix, salvage
from ._windows import (
    INVALID,
    NODES_FULL,
    OVER_CAP,
    Losses,
    ThreadTable,
    gauge_windows,
    node_windows,
    series_window,
)
from ._windows import Cursor as Cursor
from .names import is_stage_series

DRAIN_AT = 3 * 4096
"""Pending ints (three per record) that trigger a drain on the recording thread."""
MAX_CAPACITY = 10_000_000
"""Largest ``capacity``: a full ring of one series then holds 250 MB."""
MAX_SERIES = 1_000_000
"""Largest ``max_series``."""
STAGE_ROOM = 1000
"""Series of perfkit's own (``STAGE.step``, ``LOADER.data.wait``) admitted past ``max_series``."""


_ALL: weakref.WeakSet[Registry] = weakref.WeakSet()
_BY_ID: weakref.WeakValueDictionary[int, Registry] = weakref.WeakValueDictionary()
_IDS = itertools.count(1)


class _PyRegistryCore:
    """What every record touches: the pending records and the clock (in C where it is built, which
    also keeps its own entry points' records, packed)."""

    __slots__ = ("_buf", "clock")

    _buf: list[int]
    clock: Clock

    def _take_pending(self) -> tuple[list[int], bytes, bytes]:
        """Every pending record, taken at one instant: the listed ints; the packed records (int64
        node, start, end) and their marks (int64 packed index, records listed from then on): none on
        this path."""
        buf = self._buf
        n = len(buf) - len(buf) % 3
        listed = buf[:n]
        del buf[:n]  # exactly those: appends racing with us land after them
        return listed, b"", b""

    @property
    def pending(self) -> int:
        """Records made and not yet drained."""
        return len(self._buf) // 3


if TYPE_CHECKING:
    _RegistryCore = _PyRegistryCore
else:
    _RegistryCore = _PyRegistryCore if SPEEDUPS is None else SPEEDUPS.RegistryCore


class Registry(_RegistryCore):
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
        "_nodes",
        "_pid",
        "_rings",
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
        self._gpu = PendingGpu()
        self._buf = []
        self._lock = threading.RLock()
        self._rings: dict[str, Ring] = {}
        self._nodes: dict[int, list[int]] = {}
        self._gauges: dict[str, GaugeRing] = {}
        self._lost = Losses(self.max_series)
        self._generation = 0
        self._id = next(_IDS)
        self._pid = os.getpid()
        self._start_ns = self.clock()
        self._mail = Mailbox()
        _ALL.add(self)
        _BY_ID[self._id] = self

    def __repr__(self) -> str:
        return f"Registry(capacity={self.capacity}, series={len(self._rings)})"

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
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise ValueError(f"value of gauge {name!r} must be a finite number, got {value!r}")
        with self._lock:
            ring = self._gauges.get(name)
            if ring is None:
                if len(self._gauges) >= self.max_series:
                    self._lost.add(OVER_CAP + name_prefix(name), 1, name)
                    return
                ring = self._gauges[name] = GaugeRing(self.capacity)
            ring.add(t, float(value))

    def drain(self) -> None:
        """Move pending records into the rings (done for you before every cursor and snapshot)."""
        self._drain(wait_gpu=False)

    def _drain(self, *, wait_gpu: bool) -> None:
        with self._lock:
            if self._mail.inbox:
                self._receive()
            if self._gpu.items:
                self._buf += self._gpu.resolve(wait=wait_gpu)
            listed, packed, marks = self._take_pending()
            if not listed and not packed:
                return
            # A value numpy cannot read (None, a str, 2**64) sends the batch down the slow path.
            try:
                flat = np.fromiter(listed, dtype=np.int64, count=len(listed))
            except (TypeError, ValueError, OverflowError):
                good, bad = salvage(listed)
                flat = np.array(good, dtype=np.int64)
                self._lost.add(INVALID, bad)
            if packed:
                flat = _merged(
                    flat, np.frombuffer(packed, dtype=np.int64), np.frombuffer(marks, dtype=np.int64)
                )
            arr = flat.reshape(-1, 3)
            raw = arr[:, 0]
            errors = raw < 0
            nodes = np.where(errors, ~raw, raw) if errors.any() else raw
            starts, ends = arr[:, 1], arr[:, 2]
            if len(arr) and (int(flat.min()) < -TIME_LIMIT or int(flat.max()) > TIME_LIMIT):
                keep = self._valid_times(starts, ends)
                nodes, starts, ends, errors = nodes[keep], starts[keep], ends[keep], errors[keep]
            if len(nodes):
                self.ingest(nodes, starts, np.maximum(ends - starts, 0), errors)

    def _valid_times(self, starts: I64, ends: I64) -> Bools:
        """Which records have a start and end within ``TIME_LIMIT``; the others are counted."""
        keep: Bools = (
            (starts >= -TIME_LIMIT) & (starts <= TIME_LIMIT) & (ends >= -TIME_LIMIT) & (ends <= TIME_LIMIT)
        )
        self._lost.add(INVALID, len(keep) - int(np.count_nonzero(keep)))
        return keep

    def _known_nodes(self, nodes: I64) -> Bools:
        """Which records have a node of this process's table; ``OVERFLOW`` and the rest are counted."""
        known: Bools = (nodes > OVERFLOW) & (nodes < len(NODES.names))
        full = int(np.count_nonzero(nodes == OVERFLOW))
        self._lost.add(NODES_FULL, full)
        self._lost.add(INVALID, len(nodes) - int(np.count_nonzero(known)) - full)
        return known

    def _receive(self) -> None:
        before = self._mail.dropped_in
        for batch in self._mail.received():
            try:
                nodes = unpack(batch)
            except ValueError as exc:  # a batch that does not hold together: none of it enters
                self._lost.add(INVALID, len(batch.nodes), f"a worker's batch: {exc}")
                continue
            if len(nodes):
                self.ingest(nodes, batch.starts, batch.durations, batch.errors)
        if self._mail.dropped_in > before:
            self._lost.said(
                "transfer",
                f"perfkit: DataLoader workers dropped {self._mail.dropped_in - before:,} records they could "
                f"not hand over (more than {OUTBOX_MAX:,} per batch); counted in "
                "snapshot.dropped_in_transfer and the report (said once)",
            )

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
            if not len(nodes):
                return
            top = int(nodes.max())
            # bincount sizes its output by the largest node: past a few per record, count the
            # distinct nodes instead, so the cost per record does not grow with the node table.
            if top <= 4 * len(nodes) + 4096:
                counts = np.bincount(nodes)
                present, ids = np.flatnonzero(counts), nodes
            else:
                present, ids = np.unique(nodes, return_inverse=True)
                ids = ids.reshape(-1)
                counts = np.bincount(ids)
            if int(present[0]) <= OVERFLOW or top >= len(NODES.names):  # a full table, or not ours
                keep = self._known_nodes(nodes)
                if keep.any():
                    self.ingest(nodes[keep], starts[keep], durations[keep], errors[keep])
                return
            if self._mail.outbox is not None:
                self._mail.keep(nodes, starts, durations, errors)
                return
            totals = np.bincount(ids, weights=durations)
            errs = np.bincount(ids, weights=errors) if errors.any() else np.zeros(len(counts))
            names = NODES.names
            rings = self._rings
            group_of_name: dict[str, int] = {}
            group = np.zeros(len(counts), dtype=np.int64)
            over: list[int] = []
            for k, node in enumerate(present.tolist()):
                i = node if ids is nodes else k
                name = names[node]
                if name not in rings and len(rings) >= self.max_series and not self._reserved(name):
                    over.append(i)
                    self._lost.add(OVER_CAP + name_prefix(name), int(counts[i]), name)
                    continue
                mark = self._nodes.setdefault(node, [0, 0, 0])
                mark[0] += int(counts[i])
                mark[1] += round(totals[i])
                mark[2] += round(errs[i])
                group[i] = group_of_name.setdefault(name, len(group_of_name))
                if name not in rings:
                    rings[name] = Ring(self.capacity)
            if over:
                keep = ~np.isin(ids, over)
                nodes, starts, durations, errors, ids = (
                    nodes[keep],
                    starts[keep],
                    durations[keep],
                    errors[keep],
                    ids[keep],
                )
            if len(group_of_name) == 1:
                (name,) = group_of_name
                rings[name].extend(starts, durations, nodes, errors)
                return
            per_record = group[ids]
            order = np.argsort(per_record, kind="stable")
            bounds = np.searchsorted(per_record[order], np.arange(len(group_of_name) + 1))
            for name, g in group_of_name.items():
                idx = order[bounds[g] : bounds[g + 1]]
                rings[name].extend(starts[idx], durations[idx], nodes[idx], errors[idx])

    def _reserved(self, name: str) -> bool:
        """perfkit's own stage and loader series stay admitted past ``max_series`` (up to
        ``STAGE_ROOM`` more), so a program's own names can never take a monitor's step times."""
        return len(self._rings) < self.max_series + STAGE_ROOM and is_stage_series(name)

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
                series={name: ring.marks() for name, ring in self._rings.items()},
                nodes={node: (m[0], m[1], m[2]) for node, m in self._nodes.items()},
                gauges={name: (g.written, g.total) for name, g in self._gauges.items()},
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
            series = {}
            for name, ring in self._rings.items():
                data = series_window(ring, since.series.get(name) if since else None, threads)
                if data is not None:
                    series[name] = data
            tree, per_thread = node_windows(self._nodes, since, threads)
            return Snapshot(
                series,
                tree=tree,
                threads=threads.infos,
                thread_totals=per_thread,
                gauges=gauge_windows(self._gauges, since),
                start_ns=since.t_ns if since else self._start_ns,
                end_ns=end_ns,
                dropped_in_transfer=self.dropped_in_transfer - (since.dropped_in_transfer if since else 0),
                dropped=self._lost.since(since),
            )

    def reset(self) -> None:
        """Forget every record; cursors taken before now cover everything after the reset."""
        with self._lock:
            self.drain()
            self._rings.clear()
            self._nodes.clear()
            self._gauges.clear()
            self._lost.counts.clear()
            self._generation += 1
            self._start_ns = self.clock()

    def _after_fork(self) -> None:
        # The child starts clean: the parent's records are the parent's to report.
        self._lock = threading.RLock()
        self._lost = Losses(self.max_series)
        self._take_pending()
        self._mail = Mailbox()
        self._gpu = PendingGpu()
        self._rings.clear()
        self._nodes.clear()
        self._gauges.clear()
        self._generation += 1
        self._start_ns = self.clock()


def check_registry(registry: object) -> Registry | None:
    """The ``registry=`` argument every entry point takes: a Registry, or None for the current one."""
    if registry is not None and not isinstance(registry, Registry):
        raise TypeError(f"registry must be a perfkit.Registry or None, got {registry!r}")
    return registry


def _merged(listed: I64, packed: I64, marks: I64) -> I64:
    """The records of both paths in the order they were made. A mark (packed index, listed count)
    says that the packed records from that index on were made after that many listed ones; packed
    records before the first mark came before every listed one. (After a salvage dropped listed
    records with times that were not ints, the places are approximate.)"""
    if not len(marks):
        first: I64 = np.concatenate((packed, listed))
        return first
    rows, made = listed.reshape(-1, 3), packed.reshape(-1, 3)
    starts, counts = marks[0::2], marks[1::2]
    k = np.searchsorted(starts, np.arange(len(made)), side="right") - 1
    at = np.minimum(np.where(k >= 0, counts[np.maximum(k, 0)], 0), len(rows))
    flat: I64 = np.insert(rows, at, made, axis=0).reshape(-1)
    return flat


def add_record(reg: Registry, node: int, t0: int, t1: int, *, failed: bool) -> None:
    """Append one record for an interned ``node``: what entry points do off their inlined hot path."""
    buf = reg._buf
    buf += (~node if failed else node, t0, t1)
    if len(buf) > DRAIN_AT:
        reg.drain()


def _after_fork_in_child() -> None:
    for registry in list(_ALL):
        registry._after_fork()


os.register_at_fork(after_in_child=_after_fork_in_child)

DEFAULT = Registry()
_CURRENT: ContextVar[Registry] = ContextVar("perfkit_registry", default=DEFAULT)
current_registry = _CURRENT.get
configure(registry_var=_CURRENT, drain_at=DRAIN_AT, perf_counter=monotonic_ns)


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
