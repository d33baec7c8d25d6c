"""Instrument the DataLoaders each Lightning loop iterates, as soon as the loop asks for them.

Each loop gets its loaders from its ``_data_source`` and starts iterating them
(starting the workers) inside the same call, before any callback hook runs.
So the monitor wraps each loop's ``_data_source.dataloader`` from ``setup``:
the loaders are instrumented the moment they are built, and a loader Lightning
then re-creates (to add a DistributedSampler) stays instrumented, since
``perfkit.torch.instrument`` re-applies itself in ``__init__``. Waits are
recorded as ``PHASE.data.wait``, worker time as ``PHASE.data.fetch``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from lightning.pytorch import Trainer
from torch.utils.data import DataLoader

import perfkit
import perfkit.torch
from perfkit._warn import WarnOnce

_warn = WarnOnce()


def _loops(trainer: Trainer) -> list[tuple[Any, str]]:
    return [
        (trainer.fit_loop, "train"),
        (trainer.fit_loop.epoch_loop.val_loop, "val"),
        (trainer.validate_loop, "val"),
        (trainer.test_loop, "test"),
        (trainer.predict_loop, "predict"),
    ]


def hook_loaders(trainer: Trainer, registry: perfkit.Registry) -> Callable[[], None]:
    """Instrument every loader the trainer's loops request from now on; returns the undo."""
    undo: list[Callable[[], None]] = []
    for loop, phase in _loops(trainer):
        source = getattr(loop, "_data_source", None)
        request = getattr(source, "dataloader", None)
        if source is None or not callable(request):
            _warn(
                "source",
                "perfkit: this Lightning version hides its loops' data sources; no data wait measured",
            )
            continue
        if getattr(request, "__perfkit_hook__", False):
            continue
        source.dataloader = _hooked(request, perfkit.data_series(phase), registry)
        undo.append(_undo(source))

    def unhook() -> None:
        for fn in undo:
            fn()

    return unhook


def _undo(source: Any) -> Callable[[], None]:
    def undo() -> None:
        source.__dict__.pop("dataloader", None)  # the class's own method shows through again

    return undo


def _hooked(request: Callable[[], Any], name: str, registry: perfkit.Registry) -> Callable[[], Any]:
    def dataloader() -> Any:
        loaders = request()
        instrument_all(loaders, name, registry)
        return loaders

    dataloader.__perfkit_hook__ = True  # type: ignore[attr-defined]
    return dataloader


def instrument_all(obj: Any, name: str, registry: perfkit.Registry) -> int:
    """Instrument every DataLoader in ``obj`` (a loader, a CombinedLoader, lists, dicts); returns how many."""
    if isinstance(obj, DataLoader):
        perfkit.torch.instrument(obj, name, registry=registry, time_wait=True)
        return 1
    flattened = getattr(obj, "flattened", None)  # a CombinedLoader
    if isinstance(flattened, list):
        return sum(instrument_all(x, name, registry) for x in flattened)
    if isinstance(obj, Mapping):
        return sum(instrument_all(x, name, registry) for x in obj.values())
    if isinstance(obj, (list, tuple)):
        return sum(instrument_all(x, name, registry) for x in obj)
    return 0
