"""``@timed(cuda=True)``: a function's host time and its GPU time, with no synchronisation per call.

The events, their lazy resolution and the fallback without CUDA live in ``_gpu_events``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from ._buffer import DRAIN_AT
from ._context import NODES, get_cell, new_cell
from ._gpu_events import torch_events, warn_no_cuda
from ._registry import Registry, current_registry
from ._state import SWITCH
from .names import gpu_series

R = TypeVar("R")


def wrap_cuda_function(fn: Callable[..., R], name: str, registry: Registry | None) -> Callable[..., R]:
    """``@timed(cuda=True)``: host time as ``name`` and GPU time as ``name.gpu`` for each call."""
    gpu_name = gpu_series(name)

    def timed_cuda_call(*args: Any, **kwargs: Any) -> R:
        if not SWITCH.on:
            return fn(*args, **kwargs)
        reg = registry or current_registry()
        events = reg.gpu_events or torch_events()
        if events is None:
            warn_no_cuda(name)
        cell = get_cell(None) or new_cell()
        parent = cell[0]
        node = NODES.child(parent, name)
        cell[0] = node
        start = end = None
        if events is not None:
            start, end = events(), events()
        t0 = reg.clock()
        if start is not None:
            start.record()
        failed = True
        try:
            result = fn(*args, **kwargs)
            failed = False
        finally:
            if end is not None:
                end.record()
            t1 = reg.clock()
            cell[0] = parent
            buf = reg._buf
            buf += (~node if failed else node, t0, t1)
            if start is not None and end is not None:
                # GPU time overlaps the host's: not part of the section tree.
                reg._gpu.add(NODES.child(parent, gpu_name, overlay=True), t0, start, end, failed)
            if len(buf) > DRAIN_AT:
                reg.drain()
        return result

    return timed_cuda_call


def record_gpu_span(
    reg: Registry, name: str, t0: int, start: Any, end: Any, *, overlay: bool = False
) -> None:
    """One record of ``name`` from host time ``t0`` lasting the GPU time between two CUDA events
    already recorded (``start``, ``end``): resolved at a later drain, as a ``cuda=True`` section's,
    so the host never waits for the GPU here. ``overlay``: the GPU time of a host span recorded
    beside it (``NAME.gpu``), left out of the section tree."""
    cell = get_cell(None) or new_cell()
    reg._gpu.add(NODES.child(cell[0], name, overlay=overlay), t0, start, end, False)
