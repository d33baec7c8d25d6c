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
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import torch.utils.data as _data
from torch.utils.data import DataLoader
from torch.utils.data._utils import pin_memory as _pin_memory

from .._context import NODES, ThreadInfo, get_cell, new_cell
from .._registry import (
    DEFAULT,
    Registry,
    add_record,
    all_registries,
    check_registry,
    current_registry,
    registry_by_key,
)
from .._section import section
from .._state import SWITCH
from .._transfer import RecordBatch
from .._validate import check_name
from .._warn import WarnOnce
from ..names import fetch_series, iter_series, loader_of, wait_series

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
    """In a worker process: label its records, forward every registry, wrap the fetcher."""
    thread = threading.current_thread()
    info = ThreadInfo(pid=os.getpid(), tid=threading.get_ident(), name=thread.name, worker=worker_id)
    cell = get_cell(None) or new_cell()
    cell[:] = [NODES.root(info), cell[1]]  # records start at the worker's root; the owner stays
    for registry in all_registries():
        registry.forward()
    _hook_fetcher(name)


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


class _ShippingFetch:
    """A worker's fetch of one batch, timed, returned with the records made since the last one."""

    def __init__(self, fetch: Callable[[Any], Any], name: str) -> None:
        self._fetch = fetch
        self._section = section(name)

    def __call__(self, index: Any) -> Shipment:
        with self._section:
            data = self._fetch(index)
        return Shipment(data, collect_records())


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

    @property
    def wait_name(self) -> str:
        return wait_series(self.name)

    @property
    def iter_name(self) -> str:
        return iter_series(self.name)


_ITERATORS: dict[type[Any], type[Any]] = {}
_LOADERS: dict[tuple[type[Any], Settings], type[Any]] = {}


def _unwrapping(iterator_cls: type[Any]) -> type[Any]:
    cls = _ITERATORS.get(iterator_cls)
    if cls is None:
        base_next = iterator_cls.__next__

        def __next__(self: Any) -> Any:
            settings: Settings = self._perfkit
            data = (
                _timed_next(self, base_next, settings)
                if settings.time_wait and SWITCH.on
                else base_next(self)
            )
            if type(data) is Shipment:
                return deliver(data, settings.registry)
            return data

        cls = type(iterator_cls.__name__, (iterator_cls,), {"__next__": __next__, "__module__": __name__})
        _ITERATORS[iterator_cls] = cls
    return cls


def _timed_next(it: Any, base_next: Callable[[Any], Any], settings: Settings) -> Any:
    """``next()`` on the DataLoader's own iterator, recorded as the wait for one batch.

    The call that finds the end of the data is not a wait for a batch and is not recorded.
    """
    reg = settings.registry or current_registry()
    cell = get_cell(None) or new_cell()
    parent = cell[0]
    node = NODES.kids(settings.wait_name).get(parent) or NODES.child(parent, settings.wait_name)
    cell[0] = node  # work done in this process to make the batch (no workers) nests under the wait
    tracer = SWITCH.tracer
    handle = tracer.begin(settings.wait_name) if tracer is not None else None
    t0 = reg.clock()
    try:
        data = base_next(it)
    except StopIteration:
        raise
    except BaseException:
        add_record(reg, node, t0, reg.clock(), failed=True)
        raise
    finally:
        cell[0] = parent
        if tracer is not None:
            tracer.end(handle)
    add_record(reg, node, t0, reg.clock(), failed=False)
    return data


def _timed_iter_call(loader: Any, base_iter: Callable[[Any], Any], settings: Settings) -> Any:
    """``iter()`` on the DataLoader (where it starts its workers), recorded as ``NAME.data.iter``."""
    reg = settings.registry or current_registry()
    parent = (get_cell(None) or new_cell())[0]
    t0 = reg.clock()
    failed = True
    try:
        it = base_iter(loader)
        failed = False
        return it
    finally:
        add_record(reg, NODES.child(parent, settings.iter_name), t0, reg.clock(), failed=failed)


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
                it = _timed_iter_call(self, base.__iter__, settings)
            else:
                it = base.__iter__(self)
            if type(it) not in _ITERATORS.values():
                it.__class__ = _unwrapping(type(it))
            it._perfkit = self._perfkit
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
    loader._perfkit = settings


def instrument(
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

    >>> import perfkit.torch, torch
    >>> from torch.utils.data import DataLoader
    >>> loader = perfkit.torch.instrument(DataLoader(list(range(8)), batch_size=4), "train")
    >>> [b.tolist() for b in loader]
    [[0, 1, 2, 3], [4, 5, 6, 7]]
    """
    if not isinstance(loader, DataLoader):
        raise TypeError(f"loader must be a torch.utils.data.DataLoader, got {loader!r}")
    name = loader_of(check_name(name))
    check_registry(registry)
    settings = Settings(name, registry, bool(time_wait))
    _apply(loader, settings)
    loader.__class__ = _instrumented(type(loader), settings)
    return loader
