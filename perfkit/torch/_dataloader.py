"""The main side: a DataLoader is instrumented in place, the same object of the same class.

``instrument_dataloader`` sets the loader's ``worker_init_fn`` and ``collate_fn`` (``_workers``)
and nothing else on it. Batches come out of every DataLoader through one method of torch's,
``_BaseDataLoaderIter.__next__``: perfkit replaces it once, on the first ``instrument``, with a
version that hands a ``Shipment``'s records to the registry and returns its batch, and times
the wait of a loader instrumented with ``time_wait`` (its settings ride on its ``collate_fn``).

Why there, and not on the loader:

* swapping the loader's class (what perfkit did first) fails where a framework hands out an
  object posing as a DataLoader: accelerate's ``DataLoaderShard`` and ``DataLoaderDispatcher``
  wrap a ``base_dataloader`` and answer ``__class__`` with a read-only property;
* ``__iter__`` is looked up on the type, so it cannot be replaced on the instance, and a
  wrapper object fails the ``isinstance(x, DataLoader)`` checks frameworks make (Lightning adds
  its DistributedSampler and seeds workers only for DataLoaders);
* frameworks re-create loaders from their attributes (Lightning's ``_update_dataloader``,
  accelerate's ``prepare``): ``worker_init_fn`` and ``collate_fn`` are copied, an instance
  patch or a subclass would not be (with accelerate, not even the class);
* every torch-based loader's iterator is a ``_BaseDataLoaderIter`` and every one calls that
  ``__next__``: torch's, torchdata's ``StatefulDataLoader`` (whose ``__next__`` calls it),
  LitData's ``StreamingDataLoader`` and accelerate's loaders (which iterate torch's iterator
  inside their own generators: the batch is unwrapped before their code looks at it).

Its cost for a loader perfkit never saw is one Python call and two type checks per batch
(measured: 0.13 µs, where torch's own cheapest batch takes 5 µs). With ``time_wait``, ``iter()`` is
timed by replacing ``__iter__`` on the class that defines it (``DataLoader``, or a subclass's
own), again a pass-through for loaders not instrumented; an ``__iter__`` that returns no
torch iterator (a subclass's generator) is wrapped so that its ``next()`` is the wait timed.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import Any

from torch.utils.data import DataLoader
from torch.utils.data.dataloader import _BaseDataLoaderIter

from .._iteration import record_iter, record_wait
from .._registry import Registry, current_registry
from .._state import SWITCH
from .._warn import WarnOnce
from ..loaders import CpuSplit, record_settings
from ..names import fetch_cpu_gauge
from ._waits import hook_wait_parts
from ._workers import Settings, Shipment, ShippingCollate, WorkerInit, deliver

warn = WarnOnce()
_ORIGINAL = "__perfkit_original__"
_FACTS = "_perfkit_facts"


def instrument_dataloader(loader: Any, name: str, *, registry: Registry | None, time_wait: bool) -> bool:
    """Instrument ``loader`` (a DataLoader or subclass) in place; False, with one warning, where
    it refuses (its attributes are left as they were)."""
    settings = Settings(name, registry, bool(time_wait))
    init, collate = getattr(loader, "worker_init_fn", None), getattr(loader, "collate_fn", None)
    user_init = init.user_init if isinstance(init, WorkerInit) else init
    user_collate = collate.collate if isinstance(collate, ShippingCollate) else collate
    try:
        if not callable(user_collate):
            raise TypeError(f"its collate_fn is {user_collate!r}")
        loader.worker_init_fn = WorkerInit(name, user_init)
        loader.collate_fn = ShippingCollate(user_collate, settings, os.getpid())
    except Exception as exc:  # a loader that refuses attribute assignment: leave it as it was
        _restore(loader, init, collate)
        cannot_instrument(loader, name, time_wait, f"{type(exc).__name__}: {exc}")
        return False
    hook_iterators()
    if time_wait:
        time_iter(type(loader))
    return True


def _restore(loader: Any, init: Any, collate: Any) -> None:
    for attr, value in (("worker_init_fn", init), ("collate_fn", collate)):
        try:
            if getattr(loader, attr, value) is not value:
                setattr(loader, attr, value)
        except Exception:  # it refused the first assignment too: nothing changed
            pass


def cannot_instrument(loader: object, name: str, time_wait: bool, why: str) -> None:
    """The one warning for a loader left as it is: what it is, why, and what is lost."""
    kind = type(loader).__name__
    wait = "its data wait is still timed" if time_wait else "its data wait is timed only by the loop"
    warn(
        f"loader:{kind}",
        f"perfkit: the {name} loader, a {kind}, is left as it is ({why}): records made in its workers "
        f"stay there (no {name}.data.fetch); {wait}",
    )


def settings_of(collate: object) -> Settings | None:
    """The settings an instrumented loader's collate function carries, or None."""
    return collate.settings if type(collate) is ShippingCollate else None


def hook_iterators() -> None:
    """Once per process: every DataLoader iterator unwraps Shipments, and times an instrumented
    loader's waits where it asked to, with the main process's parts of each (``hook_wait_parts``)."""
    base_next = _BaseDataLoaderIter.__dict__["__next__"]
    if hasattr(base_next, _ORIGINAL):
        return

    @functools.wraps(base_next)
    def __next__(self: Any) -> Any:
        settings = settings_of(getattr(self, "_collate_fn", None))
        if settings is None:
            data = base_next(self)
            return deliver(data, None) if type(data) is Shipment else data
        if settings.time_wait and SWITCH.on:
            facts = _facts(self, settings)
            facts.wait_started(reg := settings.registry or current_registry())
            try:
                data = record_wait(lambda: base_next(self), settings.name, settings.registry)
            except StopIteration:
                facts.stopped()
                raise
            facts.wait_ended(reg)
            if type(data) is Shipment and data.cpu_s is not None:
                reg.gauge(fetch_cpu_gauge(settings.name), data.cpu_s)
        else:
            data = base_next(self)
            if SWITCH.on and type(data) is Shipment and data.cpu_s is not None:
                (settings.registry or current_registry()).gauge(fetch_cpu_gauge(settings.name), data.cpu_s)
        return deliver(data, settings.registry) if type(data) is Shipment else data

    setattr(__next__, _ORIGINAL, base_next)
    _BaseDataLoaderIter.__next__ = __next__  # type: ignore[method-assign]
    hook_wait_parts()


def _facts(it: Any, settings: Settings) -> CpuSplit:
    """The iterator's CPU split; its loader's settings are recorded on each epoch's first batch
    (persistent workers keep one iterator over epochs, reset for each)."""
    facts: CpuSplit | None = it.__dict__.get(_FACTS)
    if facts is None:
        facts = it.__dict__[_FACTS] = CpuSplit(settings.name)
    if not getattr(it, "_num_yielded", 1):
        facts.stopped()  # the time since the last epoch's last batch is no step's
        record_settings(settings.registry or current_registry(), settings.name, _Settings(it))
    return facts


class _Settings:
    """A loader's settings as its iterator holds them (torch's iterator keeps no loader)."""

    def __init__(self, it: Any) -> None:
        self.num_workers = getattr(it, "_num_workers", None)
        self.prefetch_factor = getattr(it, "_prefetch_factor", None)
        self.persistent_workers = getattr(it, "_persistent_workers", None)
        self.pin_memory = getattr(it, "_pin_memory", None)
        self.batch_size = getattr(getattr(it, "_index_sampler", None), "batch_size", None)


def time_iter(cls: type[Any]) -> None:
    """Time ``iter()`` on instrumented loaders of ``cls`` (with ``time_wait``), once per class."""
    owner = next(c for c in cls.__mro__ if "__iter__" in c.__dict__)
    original: Callable[[Any], Any] = owner.__dict__["__iter__"]
    if hasattr(original, _ORIGINAL):
        return

    @functools.wraps(original)
    def __iter__(self: Any) -> Any:
        settings = settings_of(self.__dict__.get("collate_fn"))
        outermost = type(self).__iter__ is __iter__  # not a subclass's super().__iter__()
        if settings is None or not settings.time_wait or not SWITCH.on or not outermost:
            return original(self)
        it = record_iter(lambda: original(self), settings.name, settings.registry)
        if isinstance(it, _BaseDataLoaderIter):
            return it  # its own __next__ times the waits
        return TimedWaits(it, settings)

    setattr(__iter__, _ORIGINAL, original)
    try:
        setattr(owner, "__iter__", __iter__)  # noqa: B010 - mypy: a class has no declared __iter__
    except (TypeError, AttributeError) as exc:  # a class that cannot be changed (built in C)
        warn(f"iter:{owner.__name__}", f"perfkit: iter() on a {owner.__name__} cannot be timed ({exc})")


class TimedWaits:
    """The iterator of an instrumented loader whose ``__iter__`` is its own generator: each
    ``next()`` is a wait (torch's iterator inside it leaves the record to this one)."""

    __slots__ = ("_it", "_settings")

    def __init__(self, it: Any, settings: Settings) -> None:
        self._it, self._settings = it, settings

    def __iter__(self) -> TimedWaits:
        return self

    def __next__(self) -> Any:
        settings = self._settings
        if not SWITCH.on:
            return next(self._it)
        return record_wait(self._it.__next__, settings.name, settings.registry)

    def __getattr__(self, attr: str) -> Any:
        return getattr(self._it, attr)


def is_dataloader(loader: object) -> bool:
    """A DataLoader or subclass (not an object that only answers ``__class__`` with one)."""
    return issubclass(type(loader), DataLoader)
