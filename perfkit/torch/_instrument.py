"""``instrument``: one call for every kind of loader; what it cannot instrument it leaves as it is.

The loader keeps its identity and class: a DataLoader (or subclass) is changed in place
(``_dataloader`` says how and why), an object that wraps one (accelerate's loaders, WebDataset's
``WebLoader``) has its DataLoader instrumented, a torchdata.nodes graph its mappers. Only an
iterable perfkit cannot see into is wrapped, and only to time its wait (``time_wait``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, TypeVar

from torch.utils.data import DataLoader

from .._iteration import record_iter, record_wait
from .._registry import Registry, check_registry
from .._state import SWITCH
from .._validate import check_name
from ._dataloader import cannot_instrument, instrument_dataloader, is_dataloader
from ._nodes import instrument_nodes, is_node
from ._workers import Shipment, deliver

T = TypeVar("T")
SUPPORTED = (
    "a torch DataLoader (or any subclass: torchdata's StatefulDataLoader, LitData's StreamingDataLoader), "
    "an object wrapping one (accelerate's DataLoaderShard, WebDataset's WebLoader), a torchdata.nodes node "
    "or Loader, or any iterable"
)


def instrument(
    loader: Any, name: str = "loader", *, registry: Registry | None = None, time_wait: bool = False
) -> Any:
    """Bring what ``loader``'s workers record into this process, and time the wait for each batch.

    ``name`` is the loader's, usually its stage (``"train"``, ``"val"``): worker time is
    ``NAME.data.fetch`` (per batch for a DataLoader, per item for a torchdata mapper), with the
    workers' own sections nested inside it; records go to ``registry`` or to the registry current
    where the loader is iterated. With ``time_wait=True`` each ``next()`` is also recorded as
    ``NAME.data.wait`` and ``iter()`` as ``NAME.data.iter``, for loops that do not use
    ``timed_iter`` (a Lightning ``Trainer`` iterates the loader itself).

    The loader is instrumented in place and returned: a torch ``DataLoader`` or subclass (call
    it before the first iteration, as persistent workers already started keep their old set-up;
    a framework that re-creates the loader from its attributes keeps it instrumented); an
    object wrapping one, accelerate's ``DataLoaderShard`` and ``DataLoaderDispatcher``
    (``base_dataloader``) or a pipeline such as WebDataset's ``WebLoader`` (a DataLoader among its
    ``pipeline`` stages); a ``torchdata.nodes`` node or ``Loader``. Any other iterable (a
    generator) gets its data wait timed only. Where ``time_wait`` is asked and perfkit cannot
    time the loader itself (a pipeline, a node, an iterable), the object returned is a thin
    wrapper (``len``, ``state_dict`` and every other attribute are the source's): use it. A
    loader that refuses to be instrumented is left as it is with one ``PerfkitWarning`` saying
    what is lost; what is not iterable is a ``TypeError``.

    >>> import perfkit.torch, torch
    >>> from torch.utils.data import DataLoader
    >>> loader = perfkit.torch.instrument(DataLoader(list(range(8)), batch_size=4), "train")
    >>> [b.tolist() for b in loader]
    [[0, 1, 2, 3], [4, 5, 6, 7]]
    """
    name = check_name(name)
    check_registry(registry)
    if is_dataloader(loader):
        done = instrument_dataloader(loader, name, registry=registry, time_wait=time_wait)
        return loader if done or not time_wait else TimedIterable(loader, name, registry)
    if is_node(loader):
        instrument_nodes(loader, name, registry)
        return TimedIterable(loader, name, registry) if time_wait else loader
    inner = wrapped_dataloaders(loader)
    if isinstance(loader, DataLoader):  # poses as one (its __class__ says so): instrument the one it wraps
        each = [instrument_dataloader(dl, name, registry=registry, time_wait=time_wait) for dl in inner]
        if each and all(each):
            return loader
        if not inner:
            cannot_instrument(loader, name, time_wait, "it holds no DataLoader perfkit can find")
        return TimedIterable(loader, name, registry) if time_wait else loader
    if isinstance(loader, Iterable):
        for stage in inner:
            instrument_dataloader(stage, name, registry=registry, time_wait=False)
        return TimedIterable(loader, name, registry) if time_wait else loader
    raise TypeError(f"loader must be {SUPPORTED}; got {loader!r} of type {type(loader).__name__}")


def wrapped_dataloaders(loader: object) -> list[DataLoader[Any]]:
    """The DataLoaders that ``loader`` (not one itself) iterates: accelerate's adapters keep theirs
    as ``base_dataloader`` (and answer ``__class__`` with its class); WebDataset's ``WebLoader`` is
    a ``DataPipeline`` whose first stage is the DataLoader that runs the workers. Read from the
    instance's own ``__dict__``, so no property or ``__getattr__`` of an unknown object runs.
    """
    attrs = getattr(loader, "__dict__", {})
    stages = attrs.get("pipeline")
    found = list(stages) if isinstance(stages, list) else []
    found.append(attrs.get("base_dataloader"))
    return [stage for stage in found if is_dataloader(stage)]


class TimedIterable(Iterable[T]):
    """An iterable whose ``iter()`` and every ``next()`` are recorded as the loader ``name``'s.

    Everything else (``len``, ``state_dict``, ...) is the source's.
    """

    def __init__(self, source: Iterable[T], name: str, registry: Registry | None) -> None:
        self.source = source
        self.name = name
        self.registry = registry

    def __iter__(self) -> Iterator[T]:
        if not SWITCH.on:
            return iter(self.source)
        it = record_iter(lambda: iter(self.source), self.name, self.registry)
        return _Waits(it, self.name, self.registry)

    def __len__(self) -> int:
        return len(self.source)  # type: ignore[arg-type]

    def __getattr__(self, attr: str) -> Any:
        return getattr(self.__dict__["source"], attr)


class _Waits(Iterator[T]):
    __slots__ = ("_it", "_name", "_registry")

    def __init__(self, it: Iterator[T], name: str, registry: Registry | None) -> None:
        self._it, self._name, self._registry = it, name, registry

    def __next__(self) -> T:
        item: Any = (
            record_wait(self._it.__next__, self._name, self._registry) if SWITCH.on else next(self._it)
        )
        if type(item) is Shipment:
            unwrapped: T = deliver(item, self._registry)
            return unwrapped
        return item  # type: ignore[no-any-return]

    def __getattr__(self, attr: str) -> Any:
        return getattr(self._it, attr)
