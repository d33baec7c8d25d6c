"""``instrument``: one call for every kind of loader perfkit supports."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, TypeVar

from torch.utils.data import DataLoader

from .._iteration import record_iter, record_wait
from .._registry import Registry, check_registry
from .._state import SWITCH
from .._validate import check_name
from ..names import loader_of
from ._nodes import instrument_nodes, is_node
from ._workers import Shipment, deliver, instrument_dataloader

T = TypeVar("T")
SUPPORTED = (
    "a torch DataLoader (or any subclass: torchdata's StatefulDataLoader, LitData's StreamingDataLoader), "
    "a pipeline holding one (WebDataset's WebLoader), a torchdata.nodes node or Loader, or any iterable"
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

    Supported: a torch ``DataLoader`` and its subclasses (returned as they are: call it before
    the first iteration, as persistent workers already started keep their old set-up); a
    ``torchdata.nodes`` node or ``Loader`` (returned as it is, or wrapped with ``time_wait``);
    a pipeline whose stages hold a DataLoader, such as WebDataset's ``WebLoader`` (its DataLoader
    is instrumented in place); any other iterable (data wait only). Those two are returned as
    they are, or with ``time_wait`` wrapped: use the object returned. Anything else is a
    ``TypeError``.

    >>> import perfkit.torch, torch
    >>> from torch.utils.data import DataLoader
    >>> loader = perfkit.torch.instrument(DataLoader(list(range(8)), batch_size=4), "train")
    >>> [b.tolist() for b in loader]
    [[0, 1, 2, 3], [4, 5, 6, 7]]
    """
    name = loader_of(check_name(name))
    check_registry(registry)
    if isinstance(loader, DataLoader):
        return instrument_dataloader(loader, name, registry=registry, time_wait=time_wait)
    if is_node(loader):
        instrument_nodes(loader, name, registry)
        return TimedIterable(loader, name, registry) if time_wait else loader
    if isinstance(loader, Iterable):
        for stage in pipeline_dataloaders(loader):
            instrument_dataloader(stage, name, registry=registry)
        return TimedIterable(loader, name, registry) if time_wait else loader
    raise TypeError(f"loader must be {SUPPORTED}; got {loader!r} of type {type(loader).__name__}")


def pipeline_dataloaders(loader: object) -> list[DataLoader[Any]]:
    """The DataLoaders among ``loader``'s pipeline stages.

    WebDataset's ``WebLoader`` is not a DataLoader subclass (since webdataset 0.2): it is a
    ``DataPipeline`` whose first stage is the DataLoader that runs the workers, followed by
    stages run in this process. Read from the instance's own ``__dict__``, so no property or
    ``__getattr__`` of an unknown iterable runs.
    """
    stages = getattr(loader, "__dict__", {}).get("pipeline")
    if not isinstance(stages, list):
        return []
    return [stage for stage in stages if isinstance(stage, DataLoader)]


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
