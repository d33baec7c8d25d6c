"""The worker side: records made in DataLoader worker processes travel with each batch.

``instrument(loader, "train")`` sets two attributes of the loader (see ``_dataloader`` for the
main side, and why nothing else is changed):

* ``worker_init_fn`` is wrapped (the user's own still runs): in each worker it names the
  worker's records (``ThreadInfo.worker``), switches every registry to forwarding, and wraps
  the worker's fetcher so that each batch is timed as ``train.data.fetch`` and returned as a
  ``Shipment``: the batch and everything recorded while it was produced (``__getitem__``,
  transforms, collate);
* ``collate_fn`` is wrapped (the user's own still runs): it carries the loader's ``Settings``,
  so a framework that re-creates the loader from its attributes keeps them, and in a torch
  worker whose fetcher was not hooked (a framework replaced ``worker_init_fn``) it ships the
  batch itself.

Records ride with their batch through the DataLoader's own queues (and the pin-memory thread),
so they are in the main process before the batch is: an epoch's snapshot holds its batches'
worker records even when it is taken right after the last batch. A worker killed by a signal
loses only the batch it was working on. Works the same under fork, spawn and forkserver (both
wrappers are pickled to spawned workers and import perfkit there).
"""

from __future__ import annotations

import multiprocessing
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import torch.utils.data as _data
from torch.utils.data._utils import pin_memory as _pin_memory

from .._buffer import add_record
from .._context import NODES, ThreadInfo, get_cell, new_cell
from .._registry import (
    DEFAULT,
    Registry,
    all_registries,
    current_registry,
    registry_by_key,
)
from .._section import section
from .._transfer import RecordBatch
from .._warn import WarnOnce
from ..names import fetch_cpu_series, fetch_queued_series, fetch_series

T = TypeVar("T")
_warn = WarnOnce()


class Shipment:
    """A batch and the records made while producing it, on their way to the main process."""

    __slots__ = ("cpu_s", "data", "records")

    def __init__(
        self,
        data: Any,
        records: list[tuple[tuple[int, int] | None, RecordBatch]],
        cpu_s: float | None = None,
    ) -> None:
        self.data = data
        self.records = records
        self.cpu_s = cpu_s  # the worker's CPU seconds making the batch, where its fetch was timed

    def pin_memory(self) -> Shipment:
        # The pin-memory thread calls this: pin the batch, keep the records as they are.
        pin: Callable[[Any], Any] = _pin_memory.pin_memory
        return Shipment(pin(self.data), self.records, self.cpu_s)

    def __reduce__(self) -> tuple[Any, ...]:
        return (Shipment, (self.data, self.records, self.cpu_s))


class WorkerInit:
    """The ``worker_init_fn`` that ``instrument`` installs; picklable, so spawned workers get it too."""

    def __init__(self, name: str, user_init: Callable[[int], None] | None) -> None:
        self.name = name
        self.user_init = user_init

    def __call__(self, worker_id: int) -> None:
        become_worker(worker_id, self.name)
        if self.user_init is not None:
            self.user_init(worker_id)


def become_worker(worker_id: int, name: str) -> None:
    """In a DataLoader worker process: label its records, forward every registry, wrap the fetcher."""
    label_worker(worker_id, forward=True)
    _hook_fetcher(name)


def label_worker(worker_id: int, *, forward: bool) -> None:
    """Make this thread's records a worker's (``ThreadInfo.worker``); with ``forward``, this is a
    worker process: every registry keeps its records for the main process instead."""
    thread = threading.current_thread()
    info = ThreadInfo(pid=os.getpid(), tid=threading.get_ident(), name=thread.name, worker=worker_id)
    cell = get_cell(None) or new_cell()
    root = NODES.roots[cell[0]]
    mine = NODES.threads.get(root)
    if mine is not None and (mine.pid, mine.tid) == (info.pid, info.tid):
        NODES.relabel(root, info)  # what this thread recorded before it knew is the worker's too
    else:
        cell[:] = [NODES.root(info), cell[1]]  # records start at the worker's root; the owner stays
    if forward:
        for registry in all_registries():
            registry.forward()


def _hook_fetcher(name: str) -> None:
    kind = getattr(_data, "_DatasetKind", None)  # what the worker loop creates its fetcher with
    create = getattr(kind, "create_fetcher", None)
    if kind is None or create is None:  # a torch that reorganised its worker loop
        _warn(
            "fetcher", "perfkit: this torch's DataLoader workers cannot be hooked; worker records stay there"
        )
        return
    original = getattr(create, "__perfkit_original__", create)

    def create_fetcher(*args: Any, **kwargs: Any) -> Any:
        fetcher = original(*args, **kwargs)
        fetcher.fetch = _ShippingFetch(fetcher.fetch, name)
        return fetcher

    create_fetcher.__perfkit_original__ = original  # type: ignore[attr-defined]
    kind.create_fetcher = staticmethod(create_fetcher)


_IN_FETCH = [False]  # a worker process runs one fetch at a time


class _ShippingFetch:
    """A worker's fetch of one batch, timed, returned with the records made since the last one.

    Beside its wall time (``LOADER.data.fetch``) the batch's CPU time is a record of its own
    (``LOADER.data.fetch_cpu``, as long as the CPU time, from the fetch's start): per worker and
    per batch, a worker computing (CPU near wall), waiting on I/O (CPU far below), or slower
    than the others is told apart. On a machine with more runnable threads than cores a computing
    worker's CPU falls far below its wall too (a worker computing every moment it ran measured 49%
    CPU here, with other jobs on both cores), so where the kernel says so the batch's time spent
    ready to run but waiting for a core is a record as well (``LOADER.data.fetch_queued``): CPU
    and queueing together are a computing worker's time, CPU alone a waiting one's."""

    def __init__(self, fetch: Callable[[Any], Any], name: str) -> None:
        self._fetch = fetch
        self._section = section(fetch_series(name))
        self._cpu = fetch_cpu_series(name)
        self._queued = fetch_queued_series(name)

    def __call__(self, index: Any) -> Shipment:
        _IN_FETCH[0] = True
        reg = current_registry()
        t0 = reg.clock()
        cpu = time.process_time_ns()  # a computing batch competes with the model for cores; a sleeping not
        queued = queued_ns()
        try:
            with self._section:
                data = self._fetch(index)
        finally:
            _IN_FETCH[0] = False
        cpu_ns = time.process_time_ns() - cpu
        cell = get_cell(None) or new_cell()
        add_record(reg, NODES.child(cell[0], self._cpu, overlay=True), t0, t0 + cpu_ns, failed=False)
        after = queued_ns() if queued is not None else None
        if queued is not None and after is not None:
            node = NODES.child(cell[0], self._queued, overlay=True)
            add_record(reg, node, t0, t0 + max(0, after - queued), failed=False)
        return Shipment(data, collect_records(), cpu_ns / 1e9)


_SCHEDSTAT = "/proc/thread-self/schedstat"
_SCHEDSTAT_FD: dict[tuple[int, int], int | None] = {}
"""Each (process, thread)'s open schedstat file (None: it has none); opened in the thread it
describes, since ``thread-self`` is resolved when the file is opened."""


def queued_ns() -> int | None:
    """The calling thread's run-queue delay so far, in ns: its time ready to run but waiting for a
    core (the second field of Linux's ``/proc/thread-self/schedstat``); None where the kernel keeps
    none (another system, schedstats off). About 5 µs a read (a ``pread`` of a file kept open)."""
    key = (os.getpid(), threading.get_ident())
    fd = _SCHEDSTAT_FD.get(key, -1)
    if fd == -1:
        try:
            fd = os.open(_SCHEDSTAT, os.O_RDONLY | os.O_CLOEXEC)
        except (OSError, AttributeError):
            fd = None
        _SCHEDSTAT_FD[key] = fd
    if fd is None:
        return None
    try:
        return int(os.pread(fd, 64, 0).split()[1])
    except (OSError, ValueError, IndexError):
        return None


@dataclass(frozen=True)
class Settings:
    """What ``instrument`` set for a loader, read by its iterators in the main process."""

    name: str
    registry: Registry | None
    time_wait: bool


class ShippingCollate:
    """The ``collate_fn`` ``instrument`` installs: the user's, carrying the loader's ``Settings``.

    In a torch DataLoader worker whose fetcher is not hooked (a framework replaced
    ``worker_init_fn`` after ``instrument``), the batch is returned with the records made since
    the last one: torch's iterator hands them over. Anywhere else (the main process, a worker
    pool of a loader's own, whose consumer perfkit cannot see) it returns the batch untouched.
    Picklable; the settings stay in this process.
    """

    def __init__(self, collate: Callable[[Any], Any], settings: Settings | None, main_pid: int) -> None:
        self.collate = collate
        self.settings = settings
        self.main_pid = main_pid

    def __call__(self, samples: Any) -> Any:
        batch = self.collate(samples)
        if _IN_FETCH[0] or os.getpid() == self.main_pid or _data.get_worker_info() is None:
            return batch
        if not LABELLED:
            LABELLED.append(True)
            label_worker(process_index(), forward=True)
        return Shipment(batch, collect_records())

    def __reduce__(self) -> tuple[Any, ...]:
        return (ShippingCollate, (self.collate, None, self.main_pid))


LABELLED: list[bool] = []  # this process already labels its records as a worker's (reset by fork)


def process_index() -> int:
    """A small number for this worker process: the DataLoader's worker id, else the index
    multiprocessing gives the process (``SpawnProcess-2`` -> 2), else its pid."""
    info = _data.get_worker_info()
    if info is not None:
        return int(info.id)
    name = multiprocessing.current_process().name
    tail = name.rsplit("-", 1)[-1]
    return int(tail) if tail.isdigit() else os.getpid()


def collect_records() -> list[tuple[tuple[int, int] | None, RecordBatch]]:
    """Every registry's new records in this process; the default registry is keyed ``None``."""
    out = []
    for registry in all_registries():
        batch = registry.take_records()
        if batch is not None:
            out.append((None if registry is DEFAULT else registry.key, batch))
    return out


def deliver(shipment: Shipment, registry: Registry | None) -> Any:
    """In the main process: queue a shipment's records and give back the batch."""
    default = registry or current_registry()
    for key, batch in shipment.records:
        target = default if key is None else (registry_by_key(key) or default)
        target.receive(batch)
    return shipment.data


os.register_at_fork(after_in_child=LABELLED.clear)  # a process forked from a worker is not labelled yet
