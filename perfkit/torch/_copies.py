"""Host-to-device copies of batches: their host time, their time on the stream, their bytes, pinned or not.

    with perfkit.torch.time_copy(batch):                     # around whatever moves the batch
        batch = batch.to("cuda", non_blocking=True)
    batch = perfkit.torch.to_device(batch, "cuda")          # or: move and time in one call

A copy from pageable host memory blocks the host for the whole copy (the driver stages it through
a pinned buffer), so its host time is the copy's time, and slower: on an H200, 38.5 MB took
3.5 ms pageable against 0.71 ms pinned with ``non_blocking=True``, the host back after 15 µs.
What a verdict needs to say "pin_memory=True, non_blocking=True" with a gain is here: each copy
records ``h2d.copy`` (host time), on CUDA ``h2d.copy.gpu`` (CUDA events on the current stream
around the block, resolved later, never by a synchronize here), and the gauges ``h2d.bytes`` and
``h2d.pinned_bytes`` (the batch's CPU tensors, and those of them in pinned memory).
``perfkit.resources.copy_stats`` reads a window's back; ``copy_advice`` turns them into the change
and its gain, given the pinned bandwidth ``pinned_bandwidth`` measures once on this machine.
Lightning's ``transfer_batch_to_device`` is one such block: wrap it in ``time_copy``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from types import TracebackType
from typing import Any

import torch

from .._cuda import record_gpu_span
from .._gpu_events import GpuEvent, torch_events
from .._registry import Registry, current_registry
from .._state import SWITCH
from ..names import H2D_BYTES, H2D_COPY, H2D_PINNED_BYTES, gpu_series

_H2D_GPU = gpu_series(H2D_COPY)
_MAX_DEPTH = 16


def batch_bytes(batch: Any) -> tuple[int, int]:
    """(bytes, pinned bytes) of the CPU tensors in ``batch``: tensors, dicts, lists, tuples
    (named ones too) and dataclasses, searched to a depth of 16. Tensors already on a device
    are not counted: they are not copied.

    >>> import torch
    >>> batch_bytes({"x": torch.zeros(4, 8), "y": [torch.zeros(4, dtype=torch.int64)], "id": "a"})
    (160, 0)
    """
    total = pinned = 0
    stack: list[tuple[Any, int]] = [(batch, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, torch.Tensor):
            if item.is_cpu:
                n = item.nbytes
                total += n
                if n and item.is_pinned():
                    pinned += n
        elif depth >= _MAX_DEPTH or isinstance(item, (str, bytes)):
            continue
        elif isinstance(item, (dict, Mapping)):  # a dict first: ABCs' check is slow
            stack += [(v, depth + 1) for v in item.values()]
        elif isinstance(item, (list, tuple)):
            stack += [(v, depth + 1) for v in item]
        elif dataclasses.is_dataclass(item) and not isinstance(item, type):
            stack += [(getattr(item, f.name), depth + 1) for f in dataclasses.fields(item)]
    return total, pinned


class time_copy:  # used as a function: ``with perfkit.torch.time_copy(batch):``
    """Time the block as one host-to-device copy of ``batch``; see the module docstring.

    ``registry`` None: the current one. On CPU (no CUDA events) only the host time and the bytes.

    >>> import torch, perfkit, perfkit.torch
    >>> reg = perfkit.Registry()
    >>> batch = torch.zeros(256, 256)
    >>> with perfkit.torch.time_copy(batch, registry=reg):
    ...     moved = batch.to("cpu")
    >>> snap = reg.snapshot()
    >>> snap["h2d.copy"].count, snap.gauges["h2d.bytes"].last
    (1, 262144.0)
    """

    __slots__ = ("_end", "_reg", "_start", "_t0", "batch", "registry")

    def __init__(self, batch: Any, *, registry: Registry | None = None) -> None:
        self.batch = batch
        self.registry = registry
        self._reg: Registry | None = None
        self._start: GpuEvent | None = None
        self._end: GpuEvent | None = None
        self._t0 = 0

    def __enter__(self) -> time_copy:
        if not SWITCH.on:
            return self
        reg = self._reg = self.registry or current_registry()
        events = reg.gpu_events or torch_events()
        self._t0 = reg.clock()
        if events is not None:
            self._start, self._end = events(), events()
            self._start.record()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        reg = self._reg
        if reg is None:
            return
        if self._end is not None:
            self._end.record()
        t1 = reg.clock()
        reg.record(H2D_COPY, self._t0, t1, error=exc_type is not None)
        if self._start is not None and self._end is not None:
            record_gpu_span(reg, _H2D_GPU, self._t0, self._start, self._end, overlay=True)
        total, pinned = batch_bytes(self.batch)
        reg.gauge(H2D_BYTES, float(total), t_ns=t1)
        reg.gauge(H2D_PINNED_BYTES, float(pinned), t_ns=t1)
        self._reg = self._start = self._end = None


def _move(item: Any, device: Any, non_blocking: bool, depth: int) -> Any:
    if isinstance(item, torch.Tensor):
        return item.to(device, non_blocking=non_blocking)
    if depth >= _MAX_DEPTH or isinstance(item, (str, bytes)):
        return item
    if isinstance(item, Mapping):
        return type(item)({k: _move(v, device, non_blocking, depth + 1) for k, v in item.items()})  # type: ignore[call-arg]
    if isinstance(item, tuple) and hasattr(item, "_fields"):  # a namedtuple
        return type(item)(*(_move(v, device, non_blocking, depth + 1) for v in item))
    if isinstance(item, (list, tuple)):
        return type(item)(_move(v, device, non_blocking, depth + 1) for v in item)
    return item


def to_device(
    batch: Any, device: Any, *, non_blocking: bool = False, registry: Registry | None = None
) -> Any:
    """``batch`` with every tensor moved to ``device`` (dicts, lists, tuples, named tuples), timed as
    one copy (``time_copy``).

    >>> import torch, perfkit.torch
    >>> perfkit.torch.to_device({"x": torch.ones(2)}, "cpu", registry=perfkit.Registry())["x"].device.type
    'cpu'
    """
    with time_copy(batch, registry=registry):
        return _move(batch, device, non_blocking, 0)


def pinned_bandwidth(nbytes: int = 64 * 1024 * 1024, *, device: Any = None, repeat: int = 5) -> float | None:
    """This machine's host-to-device bandwidth from pinned memory, GB/s (the best of ``repeat``
    copies of ``nbytes``, timed by CUDA events), or None without CUDA. It allocates ``nbytes`` of
    pinned memory and synchronizes: call it once, not in a loop. ``copy_advice`` reads it.

    >>> import torch, perfkit.torch
    >>> perfkit.torch.pinned_bandwidth() if not torch.cuda.is_available() else None
    """
    if not torch.cuda.is_available():
        return None
    host = torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)
    target = torch.empty(nbytes, dtype=torch.uint8, device=device or "cuda")
    best = float("inf")
    cuda: Any = torch.cuda
    for _ in range(max(1, repeat)):
        start, end = cuda.Event(enable_timing=True), cuda.Event(enable_timing=True)
        start.record()
        target.copy_(host, non_blocking=True)
        end.record()
        end.synchronize()
        best = min(best, start.elapsed_time(end) / 1e3)
    return nbytes / best / 1e9 if best > 0 else None
