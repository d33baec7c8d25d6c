"""Instrument the loaders each Lightning loop iterates, as soon as the loop asks for them.

Each loop gets its loaders from its ``_data_source`` and starts iterating them (starting
the workers) inside the same call, before any callback hook runs. So the driver wraps each
loop's ``_data_source.dataloader``: the loaders are instrumented the moment they are built
(a loader Lightning then re-creates to add a DistributedSampler stays instrumented: the
instrumentation rides on its ``worker_init_fn`` and ``collate_fn``, which Lightning copies; the
loader stays the object Lightning built, of its class), and the time the user's
``*_dataloader()`` took is recorded as ``STAGE.loader_setup``. Waits are ``STAGE.data.wait``,
``iter()`` is ``STAGE.data.iter``, worker time ``STAGE.data.fetch``. Where a stage has several
loaders (a list or dict of them: Lightning's ``dataloader_idx``), the ``k``-th is named
``STAGE/k`` from the second on (``perfkit.names.loader_name``), so each has its own wait, and
its dataset's class is told to the recorder.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from lightning.pytorch import Trainer
from torch.utils.data import DataLoader

import perfkit.torch
from perfkit.names import loader_name, loader_setup_series
from perfkit.stages import StageRecorder

from ._console import warn
from ._lightning import Undo, data_sources

_warned: set[str] = set()


def _warn(key: str, message: str) -> None:
    if key not in _warned:
        _warned.add(key)
        warn(message)


def hook_loaders(trainer: Trainer, recorder: StageRecorder) -> Undo:
    """Instrument every loader the trainer's loops request from now on; returns the undo."""
    undo: list[Undo] = []
    for source, stage in data_sources(trainer):
        request = getattr(source, "dataloader", None)
        if source is None or not callable(request) or getattr(request, "__perfkit_hook__", False):
            continue
        source.dataloader = _hooked(request, stage, recorder)
        undo.append(_undo(source))

    def unhook() -> None:
        for fn in undo:
            fn()

    return unhook


def _undo(source: Any) -> Undo:
    def undo() -> None:
        source.__dict__.pop("dataloader", None)  # the class's own method shows through again

    return undo


def _hooked(request: Callable[[], Any], stage: str, recorder: StageRecorder) -> Callable[[], Any]:
    series = loader_setup_series(stage)

    def dataloader() -> Any:
        clock = recorder.registry.clock
        t0 = clock()
        datasets: dict[str, str] = {}
        loaders = _instrument(request(), stage, recorder.registry, itertools.count(), datasets)
        recorder.record(stage, series, t0, clock())
        for loader, dataset in datasets.items():
            recorder.name_dataset(loader, dataset)
        return loaders

    dataloader.__perfkit_hook__ = True  # type: ignore[attr-defined]
    return dataloader


def _instrument(
    obj: Any, stage: str, registry: perfkit.Registry, index: Iterator[int], datasets: dict[str, str]
) -> Any:
    """``obj`` (a loader, a CombinedLoader, lists and dicts of them) with every loader instrumented.

    A DataLoader (any subclass, or an object wrapping one) or a torchdata node is instrumented in
    place; another iterable is returned wrapped (its wait is timed); what is not iterable is left
    alone, with one warning naming its type (its data wait is not measured). Loaders are named
    in the order Lightning numbers them (``dataloader_idx``, counted by ``index``): ``stage``,
    ``stage/1``, ...; each one's dataset class goes into ``datasets`` by that name.
    """
    if obj is None or isinstance(obj, (str, bytes)):
        return obj
    flattened = getattr(obj, "flattened", None)  # a CombinedLoader
    if isinstance(flattened, list):
        obj.flattened = [_instrument(x, stage, registry, index, datasets) for x in flattened]
        return obj
    if isinstance(obj, Mapping) and not isinstance(obj, DataLoader):
        return type(obj)({k: _instrument(v, stage, registry, index, datasets) for k, v in obj.items()})  # type: ignore[call-arg]
    if isinstance(obj, (list, tuple)):
        return type(obj)(_instrument(x, stage, registry, index, datasets) for x in obj)
    name = loader_name(stage, next(index))
    dataset = getattr(obj, "dataset", None)
    if dataset is not None:
        datasets[name] = type(dataset).__name__
    try:
        return perfkit.torch.instrument(obj, name, registry=registry, time_wait=True)
    except TypeError:
        _warn(
            f"loader:{type(obj).__name__}",
            f"perfkit: the {name} loader, a {type(obj).__name__}, is not iterable and cannot be timed: its "
            "data wait is not measured",
        )
        return obj
