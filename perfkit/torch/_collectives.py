"""``dist.wait``: the time of each ``torch.distributed`` collective called from Python.

``time_collectives`` replaces the collectives in the ``torch.distributed`` namespace (what
``dist.all_reduce(...)`` and frameworks' strategies call) with a timed pass-through, once per
process, before the user's script imports them. Each call is one ``dist.wait`` record: on a
rank that arrives first, most of it is waiting for the others. No synchronisation is added.

Out of reach here: DDP's gradient all-reduce (run by its C++ reducer inside ``backward``, where
the fast ranks' wait for the slow one ends up in the step: ``time_gradient_sync`` times it with a
communication hook, as ``dist.grad_wait``), a collective launched with
``async_op=True`` (the call returns at once; the wait is in ``work.wait()``), and a function
imported by name before torch finished importing.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from .._registry import Registry
from .._section import section
from ..names import DIST_WAIT

COLLECTIVES = (
    "all_gather",
    "all_gather_into_tensor",
    "all_gather_object",
    "all_reduce",
    "all_to_all",
    "all_to_all_single",
    "barrier",
    "broadcast",
    "broadcast_object_list",
    "gather",
    "gather_object",
    "monitored_barrier",
    "reduce",
    "reduce_scatter",
    "reduce_scatter_tensor",
    "scatter",
    "scatter_object_list",
)
_ORIGINAL = "__perfkit_original__"


def time_collectives(registry: Registry | None) -> list[str]:
    """Time the collectives of ``torch.distributed`` as ``dist.wait`` records; returns those timed."""
    import torch.distributed as dist

    if not dist.is_available():
        return []
    timed = []
    for name in COLLECTIVES:
        fn = getattr(dist, name, None)
        if callable(fn) and not hasattr(fn, _ORIGINAL):
            setattr(dist, name, _timed(fn, registry))
            timed.append(name)
    return timed


def _timed(fn: Callable[..., Any], registry: Registry | None) -> Callable[..., Any]:
    mark = section(DIST_WAIT, registry=registry)

    @functools.wraps(fn)
    def collective(*args: Any, **kwargs: Any) -> Any:
        with mark:
            return fn(*args, **kwargs)

    setattr(collective, _ORIGINAL, fn)
    return collective
