"""GPU-true timing: CUDA events recorded on the current stream, resolved lazily.

A ``cuda=True`` section records a start and an end event around its block and
moves on: the host never waits for the GPU. The pair is kept on the registry
and resolved when its end event has completed (checked at each drain), at the
latest when a cursor or snapshot is taken, which then waits for it. The GPU
time goes to the series ``NAME.gpu`` beside the host time in ``NAME``, so a
report shows where the host waited on the GPU and where the GPU was the
bottleneck.

The event factory is the registry's ``gpu_events`` (a seam, like its clock);
by default ``torch.cuda.Event(enable_timing=True)`` when torch is imported and
CUDA is available. Without CUDA, sections fall back to wall time and say so once.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Any, Protocol

from ._warn import WarnOnce


class GpuEvent(Protocol):
    """What perfkit needs of a ``torch.cuda.Event``."""

    def record(self) -> None: ...
    def query(self) -> bool: ...
    def synchronize(self) -> None: ...
    def elapsed_time(self, end_event: Any) -> float: ...


EventFactory = Callable[[], GpuEvent]
fallback_warning = WarnOnce()


def torch_events() -> EventFactory | None:
    """``torch.cuda.Event`` with timing, or None when torch is not imported or has no CUDA."""
    torch: Any = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_available():
        return None
    return functools.partial(torch.cuda.Event, enable_timing=True)


def warn_no_cuda(name: str) -> None:
    fallback_warning(
        "no-cuda",
        f"perfkit: section {name!r} asked for cuda=True but CUDA is not available here; "
        "it times wall-clock time instead (said once per process)",
    )


def pend(registry: Any, node: int, t0: int, start: GpuEvent, end: GpuEvent) -> None:
    """Leave a timing between two recorded events with ``registry``, to resolve when ``end`` has
    completed: its GPU time becomes a record of ``node`` starting at host time ``t0``."""
    registry._gpu.add(node, t0, start, end, False)


class PendingGpu:
    """GPU timings recorded but not yet resolved: (node, host start, start event, end event, error)."""

    __slots__ = ("items",)

    def __init__(self) -> None:
        self.items: list[tuple[int, int, GpuEvent, GpuEvent, bool]] = []

    def add(self, node: int, t0: int, start: GpuEvent, end: GpuEvent, error: bool) -> None:
        self.items.append((node, t0, start, end, error))

    def resolve(self, *, wait: bool) -> list[int]:
        """Flat (node, start, end) triplets of the completed timings; with ``wait``, of all of them."""
        items = self.items
        n = len(items)  # add() may append while we work: take exactly these n
        batch = items[:n]
        del items[:n]
        out: list[int] = []
        keep = []
        for item in batch:
            node, t0, start, end, error = item
            if wait:
                end.synchronize()
            elif not end.query():
                keep.append(item)  # later items on the stream cannot be done either
                continue
            elapsed_ns = round(start.elapsed_time(end) * 1e6)  # elapsed_time is in ms
            out += (~node if error else node, t0, t0 + elapsed_ns)
        items[0:0] = keep
        return out
