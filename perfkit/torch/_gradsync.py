"""``time_gradient_sync``: each DDP step's wait for the gradient all-reduce, per rank.

DDP all-reduces the gradients in buckets from its C++ reducer, inside ``backward``: no Python
collective is called, so ``time_collectives`` cannot see it, and a rank that waits there for a slow
rank shows only a step as long as the slow rank's. This registers a DDP communication hook that
launches the very all-reduce DDP launches without one (the bucket divided by the world size,
then summed: ``torch.distributed.algorithms.ddp_comm_hooks.default_hooks.allreduce_hook``, same
result bit for bit) and times, per step, how long the rank was held past its own backward: from
the launch of its last bucket (its backward's gradients are all ready by then) to the completion
of every bucket of the step. That is one ``dist.grad_wait`` record per step, in the open stage
epoch's window, and the account's ``sync_wait``: the rank everyone waits for waits least, and
the others' wait is its extra time. Each bucket's bytes are a sample of ``dist.bytes.all_reduce``,
as every timed collective's are::

    model = DDP(model)
    perfkit.torch.time_gradient_sync(model)     # once, before the first backward

No synchronisation is added. On CPU (gloo) the completion is stamped by a ``Future.then``
callback, which runs on gloo's thread when the work is done and which DDP waits for anyway. On
CUDA (NCCL) a future completes as soon as the work is queued, so host stamps would mean
nothing: a CUDA event is recorded on the compute stream at the last launch and another in the
callback (on the stream synchronised with the all-reduce), and the GPU time between them is
resolved later, at a drain, never by a synchronize per step.

A model can have one communication hook: where the user registered their own (PowerSGD, fp16
compression), DDP refuses a second and this raises its ``RuntimeError``; integrations catch it,
warn once and leave the user's hook alone.
"""

from __future__ import annotations

import threading
from typing import Any

from .._cuda import record_gpu_span
from .._gpu_events import EventFactory, torch_events
from .._registry import Registry, current_registry
from .._state import SWITCH
from ..names import GRAD_WAIT, collective_bytes_gauge
from ._collectives import untimed

_MARK = "_perfkit_gradient_sync"


class _SyncClock:
    """The timing state of one DDP model's hook: the step's buckets in flight and its last launch."""

    def __init__(self, registry: Registry | None) -> None:
        self.registry = registry
        self.lock = threading.Lock()  # callbacks run on the process group's threads
        self.pending = 0
        self.last: tuple[Registry, int, EventFactory | None, Any] | None = None  # at the last launch
        self.done_ns = 0
        self.end: Any = None

    def hook(self, group: Any, bucket: Any) -> Any:
        import torch.distributed as dist

        group = group if group is not None else dist.group.WORLD
        tensor = bucket.buffer()
        tensor.div_(group.size())  # first, as DDP's default does, against overflow in fp16
        if SWITCH.on:
            self._launch(tensor, bool(bucket.is_last()))
        # the original all_reduce: the namespace's may be timed (``time_collectives``), and this
        # wait is dist.grad_wait's alone, not counted twice
        all_reduce = untimed(dist.all_reduce)
        fut = all_reduce(tensor, group=group, async_op=True).get_future()
        return fut.then(self._done)

    def _launch(self, tensor: Any, last: bool) -> None:
        reg = self.registry or current_registry()  # looked up per step: a later use_registry() is followed
        events = (reg.gpu_events or torch_events()) if tensor.is_cuda else None
        # the bucket's bytes, as every collective's (``dist.bytes.all_reduce``): what crosses per step
        reg.gauge(collective_bytes_gauge("all_reduce"), float(tensor.numel() * tensor.element_size()))
        start = None
        if last and events is not None:
            start = events()
            start.record()  # on the compute stream: where the rank's own backward got to
        with self.lock:
            self.pending += 1
            if last:
                self.last = (reg, reg.clock(), events, start)

    def _done(self, fut: Any) -> Any:
        value = fut.value()[0]
        with self.lock:
            self.pending -= 1
            if self.last is None:  # an earlier bucket: the step's last one is not launched yet
                return value
            reg, t0, events, start = self.last
            if events is not None:
                self.end = events()
                self.end.record()  # on the stream synchronised with this bucket's all-reduce
            else:
                self.done_ns = max(self.done_ns, reg.clock())
            if self.pending > 0:
                return value  # a bucket of this step still in flight
            if start is not None:
                record_gpu_span(reg, GRAD_WAIT, t0, start, self.end)
            else:
                reg.record(GRAD_WAIT, t0, max(t0, self.done_ns))
            self.last, self.done_ns, self.end = None, 0, None
        return value


def time_gradient_sync(ddp_model: Any, registry: Registry | None = None) -> bool:
    """Time each step's wait for ``ddp_model``'s gradient all-reduce as ``dist.grad_wait``.

    ``ddp_model`` is a ``torch.nn.parallel.DistributedDataParallel``; ``registry`` None records to
    the registry current at each step. Registers a communication hook that all-reduces as DDP's
    default does; call it once, before the first backward. Returns False where perfkit already
    times this model; raises DDP's ``RuntimeError`` where another hook is registered.

    >>> import torch, perfkit.torch
    >>> perfkit.torch.time_gradient_sync(torch.nn.Linear(2, 2))
    Traceback (most recent call last):
    ...
    TypeError: time_gradient_sync needs a DistributedDataParallel model, got Linear
    """
    if registry is not None and not isinstance(registry, Registry):
        raise TypeError(f"registry must be a perfkit.Registry or None, got {registry!r}")
    if not callable(getattr(ddp_model, "register_comm_hook", None)):
        raise TypeError(
            f"time_gradient_sync needs a DistributedDataParallel model, got {type(ddp_model).__name__}"
        )
    if getattr(ddp_model, _MARK, None) is not None:
        return False
    clock = _SyncClock(registry)
    # a lambda: DDP reads the hook's parameter "bucket" and its annotation, which a string would fail
    ddp_model.register_comm_hook(
        getattr(ddp_model, "process_group", None), lambda state, bucket: clock.hook(state, bucket)
    )
    setattr(ddp_model, _MARK, clock)
    return True
