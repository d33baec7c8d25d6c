"""``hook_wait_parts``: where a loop's wait for a batch goes, inside the main process.

A DataLoader hands the loop a batch from ``next()``; the wait it records (``LOADER.data.wait``)
holds whatever the main process did meanwhile, and torch does four things there before
blocking on a worker:

* **sampler**: the indices of the next batch (``_BaseDataLoaderIter._next_index``: the sampler
  and batch sampler run in the main process, also with workers -- more workers cannot hide them);
* **make**: the batch itself, where no worker makes it (``num_workers=0``: the dataset's
  ``__getitem__`` and the collate function, in the dataset fetcher);
* **receive**: rebuilding a worker's batch from its queue (unpickling: tensors in shared memory,
  file descriptors, the rest copied through a pipe);
* **pin**: pinning the batch's memory, where the main thread does it (``pin_memory=True``
  without workers; with workers torch pins in a thread of its own, which the wait waits for).

Inside *receive*, each shared-memory handle opened (a tensor's storage: with the default
``file_descriptor`` strategy its descriptor is fetched from the worker that sent it, then mapped)
is a record of its own (``LOADER.data.handle``, ``perfkit.names.RECEIVE_HANDLE``): their count per
batch is the storages a batch holds, their time what fewer, larger tensors would save
(BATCH_TRANSFER's gain). A batch of 40 small tensors opened 40 handles here, 0.2-1 ms each (the
first of a batch up to 9 ms: it waits for the worker to answer); one stacked tensor opens one.

Each is timed where torch does it, inside the open wait (or ``iter()``, where a worker pool's
start draws its first batches' indices), as a series of the wait's loader
(``LOADER.data.sampler``, ``.make``, ``.receive``, ``.pin``; overlays: the user's sections still
nest directly under the wait): the account reads them (``Account.subjects["wait_parts"]``) and
what the wait spent outside them is the time it waited for a worker. Outside a timed wait (a
loader perfkit does not time, a worker process) each wrapper is a pass-through. Installed once
per process, with the iterator hook; about a microsecond a batch (benchmarks/bench_workers.py).
"""

from __future__ import annotations

import functools
import multiprocessing.queues
import multiprocessing.reduction
from collections.abc import Callable
from typing import Any

import torch.multiprocessing.reductions as _reductions
import torch.utils.data._utils.fetch as _fetch
import torch.utils.data._utils.pin_memory as _pin_memory
from torch.utils.data.dataloader import _BaseDataLoaderIter

from .._buffer import add_record
from .._context import NODES, get_cell
from .._registry import current_registry
from .._state import SWITCH
from ..names import ITER, RECEIVE_HANDLE, WAIT, wait_part_series

_ORIGINAL = "__perfkit_original__"


def _nested(part: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` timed as the open wait's loader's ``part``; a pass-through outside a timed wait."""

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        cell = get_cell(None)
        if cell is None or not SWITCH.on:
            return fn(*args, **kwargs)
        wait = NODES.names[cell[0]]
        suffix = WAIT if wait.endswith(WAIT) else ITER if wait.endswith(ITER) else None
        if suffix is None:  # iter() too: a worker pool's start draws its first batches' indices
            return fn(*args, **kwargs)
        node = NODES.child(cell[0], wait_part_series(wait[: -len(suffix)], part), overlay=True)
        reg = current_registry()
        t0 = reg.clock()
        failed = True
        try:
            out = fn(*args, **kwargs)
            failed = False
            return out
        except StopIteration:  # the sampler is done: the loop's end, not a fault
            failed = False
            raise
        finally:
            add_record(reg, node, t0, reg.clock(), failed=failed)

    setattr(call, _ORIGINAL, fn)
    return call


def _replace(owner: Any, name: str, part: str) -> None:
    original = owner.__dict__[name] if isinstance(owner, type) else getattr(owner, name)
    if not hasattr(original, _ORIGINAL):
        setattr(owner, name, _nested(part, original))


class _ReceivingPickler(multiprocessing.reduction.ForkingPickler):
    """What ``multiprocessing.queues`` unpickles a queue's item with: a rebuilt batch, timed."""

    loads = staticmethod(_nested("receive", multiprocessing.reduction.ForkingPickler.loads))


def hook_wait_parts() -> None:
    """Once per process: time the sampler, the main process's batch making, rebuilding a worker's
    batch (and each shared-memory handle in it) and pinning, inside the waits perfkit times."""
    _replace(_BaseDataLoaderIter, "_next_index", "sampler")
    for fetcher in (_fetch._MapDatasetFetcher, _fetch._IterableDatasetFetcher):
        _replace(fetcher, "fetch", "make")
    _replace(_pin_memory, "pin_memory", "pin")
    for name in ("rebuild_storage_fd", "rebuild_storage_filename"):  # pickle finds them by name
        if hasattr(_reductions, name):
            _replace(_reductions, name, RECEIVE_HANDLE)
    queues: Any = multiprocessing.queues
    if queues._ForkingPickler is multiprocessing.reduction.ForkingPickler:
        queues._ForkingPickler = _ReceivingPickler
