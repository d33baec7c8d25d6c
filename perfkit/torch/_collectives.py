"""``time_collectives``: each collective's exposed wait, in the step part it fell in, with its bytes.

A collective holds a rank while it waits for the others and moves the data. How much of that the
step sees depends on how it was called, so each way is timed where the rank is held:

* **synchronous** (``dist.all_reduce(t)``; FSDP2's all-gathers and reduce-scatters on CPU): over
  gloo the calling thread is blocked for the whole call, so the call's duration is the wait;
* **asynchronous** (``async_op=True``): the call returns a ``Work`` at once and compute may overlap
  the collective; the rank is held only in ``work.wait()``, which is what is timed;
* **on CUDA** the host is not held at all, the stream is: see ``perfkit.torch._streams``.

So the collectives of the ``torch.distributed`` namespace (what a script, FSDP2, Lightning's and
accelerate's strategies call, looked up at each call) become pass-throughs that note the bytes of
the largest tensor argument (an all-gather's output, a reduce-scatter's input, an all-reduce's
tensor) and, on return, record the call (synchronous) or tag the ``Work`` it returned (weakly:
a work never waited on costs nothing); ``Work.wait`` is wrapped to time a tagged work. Each wait
is one record ``dist.wait.PART.COLLECTIVE`` in the consumer's registry, ``PART`` the step part the
rank was in when it waited (the consumer's ``part_now``: a ``StageRecorder`` knows), and each call
one sample of the gauge ``dist.bytes.COLLECTIVE``. Nothing is synchronised. A call costs a few
microseconds (benchmarks/bench_collectives.py).

torch 2.13 has one hook at the c10d level, ``ProcessGroup._register_on_completion_hook``: NCCL only
(gloo refuses it), and it gives a collective's whole duration from its launch, overlap included,
not the part the rank waited for. Not seen here: DDP's gradient all-reduce (its C++ reducer calls
none of these; ``time_gradient_sync`` times it as ``dist.grad_wait``, so nothing is counted twice),
the functional collectives (``torch.distributed._functional_collectives``: DTensor's
redistributions, tensor parallelism, compiled graphs), point-to-point sends, a collective imported
by name before the wrappers went in, and perfkit's own merge of the ranks (``untimed``).
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Callable
from typing import Any, Protocol

import torch

from .._buffer import add_record
from .._context import NODES, get_cell, new_cell
from .._cuda import record_gpu_span
from .._gpu_events import EventFactory, GpuEvent, torch_events
from .._registry import Registry
from .._state import SWITCH
from ..names import collective_bytes_gauge, collective_series
from ._streams import Streams, cuda_streams

ENTRY_POINTS = {
    **dict.fromkeys(
        (
            "all_gather",
            "all_gather_single",
            "all_gather_into_tensor",
            "_all_gather_base",
            "all_gather_coalesced",
            "all_gather_object",
        ),
        "all_gather",
    ),
    **dict.fromkeys(
        ("reduce_scatter", "reduce_scatter_single", "reduce_scatter_tensor", "_reduce_scatter_base"),
        "reduce_scatter",
    ),
    **dict.fromkeys(("all_reduce", "all_reduce_coalesced"), "all_reduce"),
    **dict.fromkeys(("broadcast", "broadcast_object_list"), "broadcast"),
    **dict.fromkeys(("all_to_all", "all_to_all_single"), "all_to_all"),
    "reduce": "reduce",
    **dict.fromkeys(("gather", "gather_object"), "gather"),
    **dict.fromkeys(("scatter", "scatter_object_list"), "scatter"),
    **dict.fromkeys(("barrier", "monitored_barrier"), "barrier"),
}
"""Each entry point of ``torch.distributed`` timed, and its collective (``perfkit.names.COLLECTIVES``)."""
ORIGINAL = "__perfkit_original__"


class CollectiveConsumer(Protocol):
    """Who receives the waits: a ``perfkit.stages.StageRecorder``."""

    @property
    def registry(self) -> Registry: ...

    def part_now(self) -> str: ...


_CONSUMERS: list[CollectiveConsumer] = []  # who the process-wide wrappers record for, while any does
_UNDO: list[Callable[[], None]] = []
_TAGS: dict[int, tuple[weakref.ref[Any], str, bool]] = {}  # id(work) -> (work, collective, on a device)


def time_collectives(consumer: CollectiveConsumer, *, streams: Streams | None = None) -> Callable[[], None]:
    """Record each collective's exposed wait for ``consumer`` from now until the returned function
    is called (the wrappers go with the last consumer); ``streams`` is the device seam (default
    ``torch.cuda``'s where CUDA is available). See the module docstring.

    >>> import perfkit, perfkit.torch
    >>> class Recorder:
    ...     registry = perfkit.Registry()
    ...     def part_now(self): return "forward"
    >>> stop = perfkit.torch.time_collectives(Recorder())
    >>> import torch.distributed as dist
    >>> hasattr(dist.all_reduce, "__perfkit_original__")
    True
    >>> stop()
    """
    if not callable(getattr(consumer, "part_now", None)) or not isinstance(
        getattr(consumer, "registry", None), Registry
    ):
        raise TypeError(f"consumer must have a registry and part_now(), got {consumer!r}")
    import torch.distributed as dist

    if not dist.is_available():
        return lambda: None
    if not _CONSUMERS:
        _install(dist, streams if streams is not None else cuda_streams())
    _CONSUMERS.append(consumer)

    def stop() -> None:
        if consumer in _CONSUMERS:
            _CONSUMERS.remove(consumer)
            if not _CONSUMERS:
                while _UNDO:
                    _UNDO.pop()()
                _TAGS.clear()

    return stop


def untimed(fn: Callable[..., Any]) -> Callable[..., Any]:
    """The original of a timed entry point (``fn`` itself if it is none): perfkit's own collectives
    (the ranks' merge, DDP's all-reduce under ``time_gradient_sync``) are not the training's."""
    original: Callable[..., Any] = getattr(fn, ORIGINAL, fn)
    return original


def record_wait(collective: str, t0: int, t1: int, *, failed: bool = False) -> None:
    """One wait of ``collective`` from ``t0`` to ``t1`` (the first consumer's clock), for every
    consumer, in the part each is in now."""
    parent = (get_cell(None) or new_cell())[0]  # nested in the open section, as Registry.record has it
    for c in _CONSUMERS:
        node = NODES.child(parent, collective_series(c.part_now(), collective))
        add_record(c.registry, node, t0, t1, failed=failed)


def tag(work: Any, collective: str, device: bool) -> None:
    """Note that ``work`` is ``collective``'s, so its ``wait()`` is timed; weakly, as a work that is
    never waited on must not keep its tensors alive."""
    key = id(work)

    def forget(_: object) -> None:
        _TAGS.pop(key, None)

    try:
        ref = weakref.ref(work, forget)
    except TypeError:  # a backend's own work without weak references: its wait is not timed
        return
    _TAGS[key] = (ref, collective, device)


class _Sink:
    """The consumers, as the device's waits need them (``perfkit.torch._streams.WaitSink``)."""

    def clock(self) -> int:
        return _CONSUMERS[0].registry.clock()

    def events(self) -> EventFactory | None:
        reg = _CONSUMERS[0].registry
        return reg.gpu_events or torch_events()

    def span(self, collective: str, t0: int, start: GpuEvent, end: GpuEvent) -> None:
        for c in _CONSUMERS:
            record_gpu_span(c.registry, collective_series(c.part_now(), collective), t0, start, end)

    def tag(self, work: Any, collective: str, device: bool) -> None:
        tag(work, collective, device)


_SINK = _Sink()


def _size(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[int, bool]:
    """The bytes of the largest tensor argument (a list of tensors counts as their sum), and
    whether it lives on a device with streams (CUDA)."""
    largest, on = 0, None
    for arg in (*args, *kwargs.values()):
        if isinstance(arg, torch.Tensor):
            n = arg.numel() * arg.element_size()
        elif isinstance(arg, (list, tuple)) and arg and isinstance(arg[0], torch.Tensor):
            n = sum(t.numel() * t.element_size() for t in arg if isinstance(t, torch.Tensor))
            arg = arg[0]
        else:
            continue
        if n >= largest:
            largest, on = n, arg
    streams = _STREAMS[0]
    return largest, on is not None and streams is not None and streams.holds(on)


_STREAMS: list[Streams | None] = [None]  # the device's, while the wrappers are in


def _timed(fn: Callable[..., Any], collective: str) -> Callable[..., Any]:
    gauge = collective_bytes_gauge(collective)

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        if not SWITCH.on or not _CONSUMERS:
            return fn(*args, **kwargs)
        nbytes, device = _size(args, kwargs)
        reg = _CONSUMERS[0].registry
        t0 = reg.clock()
        for c in _CONSUMERS:
            c.registry.gauge(gauge, float(nbytes), t_ns=t0)
        streams = _STREAMS[0]
        if device and streams is not None:
            return streams.call(fn, collective, args, kwargs, _SINK)
        work = fn(*args, **kwargs)
        if work is None:  # synchronous: the thread was held for the whole call
            record_wait(collective, t0, reg.clock())
        else:
            tag(work, collective, False)
        return work

    setattr(call, ORIGINAL, fn)
    return call


def _install(dist: Any, streams: Streams | None) -> None:
    for name, collective in ENTRY_POINTS.items():
        fn = getattr(dist, name, None)
        if callable(fn) and not hasattr(fn, ORIGINAL):
            setattr(dist, name, _timed(fn, collective))
            _UNDO.append(functools.partial(setattr, dist, name, fn))
    work = dist.distributed_c10d.Work
    original = work.wait

    def wait(self: Any, *args: Any, **kwargs: Any) -> Any:
        entry = _TAGS.pop(id(self), None) if _TAGS else None
        if entry is None or entry[0]() is not self or not _CONSUMERS or not SWITCH.on:
            return original(self, *args, **kwargs)
        collective, device = entry[1], entry[2]
        if device and streams is not None:
            return streams.wait(lambda: original(self, *args, **kwargs), collective, _SINK)
        reg = _CONSUMERS[0].registry
        t0, failed = reg.clock(), True
        try:
            result = original(self, *args, **kwargs)
            failed = False
            return result
        finally:
            record_wait(collective, t0, reg.clock(), failed=failed)

    work.wait = wait
    _UNDO.append(functools.partial(setattr, work, "wait", original))
    _STREAMS[0] = streams
    if streams is not None:
        _UNDO.append(streams.install(_SINK))
    _UNDO.append(functools.partial(_STREAMS.__setitem__, 0, None))
