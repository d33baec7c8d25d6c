"""The trial's loaders: the user's, imported from a factory (``load_loader``: ``perfkit trial
MODULE:FACTORY``), the candidate settings, and a DataLoader rebuilt at one of them from the user's.

The user's loader is never touched: each setting is a new DataLoader made from its arguments
(dataset, sampler or batch sampler, collate_fn, worker_init_fn, generator, multiprocessing
context, ...). What could change the user's run is copied instead of shared: the sampler
(a ``RandomSampler`` draws from its generator, so sharing it would shift the user's data
order) and the loader's generator. perfkit's own wrappers on an instrumented loader are taken
off, so the trial's batches ship no records into the run.
"""

from __future__ import annotations

import copy
import importlib
import os
import sys
from dataclasses import dataclass, replace
from typing import Any

import torch
from torch.utils.data import DataLoader, IterableDataset

from ._workers import ShippingCollate, WorkerInit


def load_loader(spec: str, which: str = "train") -> DataLoader[Any]:
    """The DataLoader ``MODULE:FACTORY`` names: what the callable returns, or a Lightning datamodule's
    (a class is made with no arguments; ``setup("fit")``, then ``train_dataloader()`` or, with
    ``which="val"``, ``val_dataloader()``). Anything else is a ``ValueError`` in one line.

    >>> load_loader("no_such_module:make")
    Traceback (most recent call last):
    ...
    ValueError: cannot import no_such_module (from no_such_module:make): No module named 'no_such_module'
    """
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise ValueError(f"the loader must be given as MODULE:FACTORY (mypkg.data:make_loader), got {spec!r}")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # as ``python -m``: the working folder's modules import
    try:
        obj: Any = importlib.import_module(module_name)
        for part in attr.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"cannot import {module_name} (from {spec}): {exc}") from None
    try:
        if isinstance(obj, type) or not hasattr(obj, "train_dataloader"):
            obj = obj() if callable(obj) and not isinstance(obj, DataLoader) else obj
        if hasattr(obj, "train_dataloader"):  # a datamodule
            obj.setup("fit")
            obj = obj.val_dataloader() if which == "val" else obj.train_dataloader()
    except Exception as exc:  # the user's code failed: one line, not a traceback of it
        raise ValueError(f"{spec} failed: {type(exc).__name__}: {exc}") from None
    if not isinstance(obj, DataLoader):
        raise ValueError(f"{spec} gave a {type(obj).__name__}, not a torch DataLoader (nor a datamodule)")
    loader: DataLoader[Any] = obj
    return loader


@dataclass(frozen=True)
class Candidate:
    """A DataLoader setting to try."""

    num_workers: int
    prefetch_factor: int | None
    persistent_workers: bool
    pin_memory: bool


def worker_counts(loader: DataLoader[Any], workers: list[int]) -> list[Candidate]:
    """The first round: each worker count, with the loader's own pinning, workers not persistent
    (so each row's start is a cold start, as a first epoch pays it)."""
    pin = bool(loader.pin_memory)
    return [Candidate(k, 2 if k else None, False, pin) for k in workers]


def variants(loader: DataLoader[Any], base: Candidate) -> list[Candidate]:
    """The second round, at the first round's pick (with workers only): workers kept across
    epochs (their start is paid once), a deeper prefetch queue, and pinned memory where a CUDA
    device is there to copy to (without one, pinning does nothing)."""
    if not base.num_workers:
        return []
    out = [replace(base, persistent_workers=True), replace(base, prefetch_factor=4)]
    if not base.pin_memory and torch.cuda.is_available():
        out.append(replace(base, pin_memory=True))
    return out


def rebuild(loader: DataLoader[Any], c: Candidate) -> DataLoader[Any]:
    """A new DataLoader with ``loader``'s arguments and ``c``'s settings."""
    init, collate = loader.worker_init_fn, loader.collate_fn
    kwargs: dict[str, Any] = {
        "num_workers": c.num_workers,
        "collate_fn": collate.collate if isinstance(collate, ShippingCollate) else collate,
        "worker_init_fn": init.user_init if isinstance(init, WorkerInit) else init,
        "pin_memory": c.pin_memory,
        "timeout": loader.timeout,
        "generator": _copy_generator(loader.generator),
        "pin_memory_device": loader.pin_memory_device,
    }
    if c.num_workers:
        kwargs.update(
            prefetch_factor=c.prefetch_factor,
            persistent_workers=c.persistent_workers,
            multiprocessing_context=loader.multiprocessing_context,
        )
    if hasattr(loader, "in_order"):  # torch 2.6+
        kwargs["in_order"] = loader.in_order
    if isinstance(loader.dataset, IterableDataset):
        kwargs.update(batch_size=loader.batch_size, drop_last=loader.drop_last)
    elif loader.batch_size is not None:  # batch_size given: torch made the batch sampler
        kwargs.update(
            sampler=_copy(loader.sampler, loader), batch_size=loader.batch_size, drop_last=loader.drop_last
        )
    elif loader.batch_sampler is not None:
        kwargs["batch_sampler"] = _copy(loader.batch_sampler, loader)
    else:  # automatic batching off: one sample at a time
        kwargs.update(sampler=_copy(loader.sampler, loader), batch_size=None)
    return DataLoader(loader.dataset, **kwargs)


def _copy(sampler: Any, loader: DataLoader[Any]) -> Any:
    """A copy of ``sampler`` that shares the dataset (never copied); the sampler itself where it
    cannot be copied (then iterating it may advance its generator)."""
    try:
        return copy.deepcopy(sampler, memo={id(loader.dataset): loader.dataset})
    except Exception:  # a sampler holding a lock, a file, a process group
        return sampler


def _copy_generator(g: torch.Generator | None) -> torch.Generator | None:
    if g is None:
        return None
    out = torch.Generator(device=g.device)
    out.set_state(g.get_state())
    return out
