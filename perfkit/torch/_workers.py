"""Records made in DataLoader worker processes, handed to the main process with each batch.

``instrument(loader, "train")`` makes three changes, all in one call:

* ``worker_init_fn`` is wrapped (the user's own still runs): in each worker it
  names the worker's records (``ThreadInfo.worker``), switches every registry
  to forwarding, and wraps the worker's fetcher so that each batch is timed as
  ``train.data.fetch`` and returned together with everything recorded while it was
  produced (``__getitem__``, transforms, collate);
* the loader's class is swapped for a subclass whose iterators unwrap those
  batches and queue the records on the main process's registry: a list append,
  no lock and no waiting, so the training loop gains no synchronisation point;
* nothing else: the dataset, sampler and collate function are untouched.

Records ride with their batch through the DataLoader's own queues (and the
pin-memory thread), so they are in the main process before the batch is: an
epoch's snapshot holds its batches' worker records even when it is taken right
after the last batch. A worker killed by a signal loses only the batch it was
working on. Works the same under fork, spawn and forkserver (the wrapper is
pickled to spawned workers and imports perfkit there).
"""

from __future__ import annotations

import functools
import multiprocessing
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import torch.utils.data as _data
from torch.utils.data import DataLoader
from torch.utils.data._utils import pin_memory as _pin_memory

from .._context import NODES, ThreadInfo, get_cell, new_cell
from .._iteration import record_iter, record_wait
from .._registry import (
    DEFAULT,
    Registry,
    all_registries,
    current_registry,
    registry_by_key,
)
from .._section import section
from .._state import SWITCH
from .._transfer import RecordBatch
from .._warn import WarnOnce
from ..names import fetch_series

T = TypeVar("T")
_warn = WarnOnce()


class Shipment:
    """A batch and the records made while producing it, on their way to the main process."""

    __slots__ = ("data", "records")

    def __init__(self, data: Any, records: list[tuple[tuple[int, int] | None, RecordBatch]]) -> None:
        self.data = data
        self.records = records

    def pin_memory(self) -> Shipment:
        # The pin-memory thread calls this: pin the batch, keep the records as they are.
        pin: Callable[[Any], Any] = _pin_memory.pin_memory
        return Shipment(pin(self.data), self.records)

    def __reduce__(self) -> tuple[Any, ...]:
        return (Shipment, (self.data, self.records))


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
    fetch_name = fetch_series(name)

    def create_fetcher(*args: Any, **kwargs: Any) -> Any:
        fetcher = original(*args, **kwargs)
        fetcher.fetch = _ShippingFetch(fetcher.fetch, fetch_name)
        return fetcher

    create_fetcher.__perfkit_original__ = original  # type: ignore[attr-defined]
    kind.create_fetcher = staticmethod(create_fetcher)


_IN_FETCH = [False]  # a worker process runs one fetch at a time


class _ShippingFetch:
    """A worker's fetch of one batch, timed, returned with the records made since the last one."""

    def __init__(self, fetch: Callable[[Any], Any], name: str) -> None:
        self._fetch = fetch
        self._section = section(name)

    def __call__(self, index: Any) -> Shipment:
        _IN_FETCH[0] = True
        try:
            with self._section:
                data = self._fetch(index)
        finally:
            _IN_FETCH[0] = False
        return Shipment(data, collect_records())


class ShippingCollate:
    """The ``collate_fn`` ``instrument`` installs: the user's, and, in a worker whose loop is not
    torch's (a DataLoader subclass with its own workers, which never runs the hooked fetcher),
    the batch is returned with the records made since the last one. Picklable."""

    def __init__(self, collate: Callable[[Any], Any], main_pid: int) -> None:
        self.collate = collate
        self.main_pid = main_pid

    def __call__(self, samples: Any) -> Any:
        batch = self.collate(samples)
        if _IN_FETCH[0] or os.getpid() == self.main_pid:
            return batch  # torch's own worker loop ships it, or this is the main process
        if not LABELLED:
            LABELLED.append(True)
            label_worker(process_index(), forward=True)
        return Shipment(batch, collect_records())


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


@dataclass(frozen=True)
class Settings:
    """What ``instrument`` set on a loader: kept on its class too, so a loader that a framework
    re-creates from the original arguments (Lightning, to add a DistributedSampler) stays instrumented."""

    name: str
    registry: Registry | None
    time_wait: bool


_ITERATORS: dict[type[Any], type[Any]] = {}
_LOADERS: dict[tuple[type[Any], Settings], type[Any]] = {}


def _unwrapping(iterator_cls: type[Any]) -> type[Any]:
    cls = _ITERATORS.get(iterator_cls)
    if cls is None:
        base_next = iterator_cls.__next__

        def __next__(self: Any) -> Any:
            settings: Settings = self._perfkit
            data = (
                record_wait(lambda: base_next(self), settings.name, settings.registry)
                if settings.time_wait and SWITCH.on
                else base_next(self)
            )
            if type(data) is Shipment:
                return deliver(data, settings.registry)
            return data

        cls = type(iterator_cls.__name__, (iterator_cls,), {"__next__": __next__, "__module__": __name__})
        _ITERATORS[iterator_cls] = cls
    return cls


class _Unwrapped:
    """The iterator of a loader whose own iterator cannot be given a subclass (a generator)."""

    __slots__ = ("_it", "_perfkit")

    def __init__(self, it: Any, settings: Settings) -> None:
        self._it, self._perfkit = it, settings

    def __iter__(self) -> _Unwrapped:
        return self

    def __next__(self) -> Any:
        settings = self._perfkit
        data = (
            record_wait(self._it.__next__, settings.name, settings.registry)
            if settings.time_wait and SWITCH.on
            else next(self._it)
        )
        return deliver(data, settings.registry) if type(data) is Shipment else data


def _instrumented(loader_cls: type[Any], settings: Settings) -> type[Any]:
    base = getattr(loader_cls, "__perfkit_base__", loader_cls)
    cls = _LOADERS.get((base, settings))
    if cls is None:
        base_init = base.__init__

        @functools.wraps(base_init)  # keeps the signature frameworks read to re-create the loader
        def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
            base_init(self, *args, **kwargs)
            _apply(self, settings)

        def __iter__(self: Any) -> Any:
            settings: Settings = self._perfkit
            if settings.time_wait and SWITCH.on:
                it = record_iter(lambda: base.__iter__(self), settings.name, settings.registry)
            else:
                it = base.__iter__(self)
            if type(it) in _ITERATORS.values():
                it._perfkit = settings
                return it
            try:
                it.__class__ = _unwrapping(type(it))
            except TypeError:  # a generator (a subclass's own loop) cannot change class: wrap it
                return _Unwrapped(it, settings)
            it._perfkit = settings
            return it

        namespace = {
            "__init__": __init__,
            "__iter__": __iter__,
            "__perfkit_base__": base,
            "__module__": base.__module__,
            "__qualname__": base.__qualname__,
        }
        cls = type(base.__name__, (base,), namespace)
        _LOADERS[(base, settings)] = cls
    return cls


def _apply(loader: Any, settings: Settings) -> None:
    init = loader.worker_init_fn
    if isinstance(init, WorkerInit):
        init = init.user_init
    loader.worker_init_fn = WorkerInit(settings.name, init)
    collate = loader.collate_fn
    if collate is not None and not isinstance(collate, ShippingCollate):
        loader.collate_fn = ShippingCollate(collate, os.getpid())
    loader._perfkit = settings


def instrument_dataloader(
    loader: DataLoader[T], name: str = "loader", *, registry: Registry | None = None, time_wait: bool = False
) -> DataLoader[T]:
    """Bring the records made in ``loader``'s worker processes into this process. Returns ``loader``.

    ``name`` is the loader's, usually its stage (``"train"``, ``"val"``): each batch's worker
    time is recorded as ``NAME.data.fetch``, with the worker's own sections (``@timed`` collate
    functions, transforms) nested inside it; records go to ``registry`` or to the registry
    current where the loader is iterated. With ``time_wait=True`` each ``next()`` on the loader
    is also recorded as ``NAME.data.wait`` and ``iter()`` as ``NAME.data.iter``, for loops that
    do not use ``timed_iter`` (a Lightning ``Trainer`` iterates the loader itself).

    Call it before the first iteration: persistent workers already started keep their old
    set-up. With ``num_workers=0`` everything runs in this process and is recorded directly.

    >>> import torch
    >>> from torch.utils.data import DataLoader
    >>> loader = instrument_dataloader(DataLoader(list(range(8)), batch_size=4), "train")
    >>> [b.tolist() for b in loader]
    [[0, 1, 2, 3], [4, 5, 6, 7]]
    """
    settings = Settings(name, registry, bool(time_wait))
    _apply(loader, settings)
    loader.__class__ = _instrumented(type(loader), settings)
    return loader


os.register_at_fork(after_in_child=LABELLED.clear)  # a process forked from a worker is not labelled yet
