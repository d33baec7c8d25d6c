"""``time_step_parts``: a step's backward, optimizer step and zero_grad, from torch itself.

Every training loop -- a plain script, ``perfkit run``, the Hugging Face Trainer, Lightning with
automatic or manual optimization -- ends in the same three torch calls, so perfkit times them
there, with no change to the user's code:

* **backward**: ``torch.autograd.backward``, wrapped (``Tensor.backward`` calls it, and so do
  accelerate's ``backward``, Lightning's precision plugins and a ``GradScaler``'s scaled loss);
* **the optimizer step**: torch's global optimizer-step hooks
  (``register_optimizer_step_pre_hook`` / ``..._post_hook``, every ``torch.optim.Optimizer``);
  a closure the step runs (Lightning's training_step and backward, LBFGS) is inside it, and the
  recorder counts each second for the innermost part only;
* **zero_grad**: ``Optimizer.zero_grad`` and ``Module.zero_grad``, wrapped on their classes.

Forward has no such place: torch's global module hooks would run at every submodule call. A
framework that knows it says it (Lightning's ``training_step`` action); elsewhere a step's forward
is what comes before its first backward or optimizer step, less a ``zero_grad`` called first
(``perfkit.stages.StepParts``). Each call reaches the
consumers (a session's ``StageRecorder``: ``part_begin`` / ``part_end``), which ignore it outside
an open step. The wrappers cost about a microsecond a call, and none is installed while no
consumer is (benchmarks/bench_step_parts.py).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Protocol

import torch
from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook

from ..names import BACKWARD, OPTIMIZER, ZERO_GRAD


class PartConsumer(Protocol):
    """What hears of each part: a ``perfkit.stages.StageRecorder``."""

    def part_begin(self, part: str) -> None: ...

    def part_end(self, part: str) -> None: ...


_CONSUMERS: list[PartConsumer] = []  # who the process-wide wrappers tell, while any does
_UNDO: list[Callable[[], None]] = []


def time_step_parts(consumer: PartConsumer) -> Callable[[], None]:
    """Tell ``consumer`` when each backward, optimizer step and zero_grad of this process begins and
    ends, from now until the returned function is called (the wrappers go with the last consumer).

    >>> import perfkit.torch
    >>> class Seen:
    ...     def __init__(self): self.parts = []
    ...     def part_begin(self, part): self.parts.append(part)
    ...     def part_end(self, part): pass
    >>> seen = Seen()
    >>> stop = perfkit.torch.time_step_parts(seen)
    >>> w = torch.ones(2, requires_grad=True)
    >>> opt = torch.optim.SGD([w], lr=0.1)
    >>> opt.zero_grad(); (w * w).sum().backward(); opt.step(); stop()
    >>> seen.parts
    ['zero_grad', 'backward', 'optimizer']
    """
    if not callable(getattr(consumer, "part_begin", None)) or not callable(
        getattr(consumer, "part_end", None)
    ):
        raise TypeError(f"consumer must have part_begin(part) and part_end(part), got {consumer!r}")
    if not _CONSUMERS:
        _install()
    _CONSUMERS.append(consumer)

    def stop() -> None:
        if consumer in _CONSUMERS:
            _CONSUMERS.remove(consumer)
            if not _CONSUMERS:
                while _UNDO:
                    _UNDO.pop()()

    return stop


def _begin(part: str) -> None:
    for consumer in _CONSUMERS:
        consumer.part_begin(part)


def _end(part: str) -> None:
    for consumer in _CONSUMERS:
        consumer.part_end(part)


def _timed(part: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        _begin(part)
        try:
            return fn(*args, **kwargs)
        finally:
            _end(part)

    call.__perfkit_part__ = part  # type: ignore[attr-defined]
    return call


def _replace(owner: Any, name: str, part: str) -> None:
    original = owner.__dict__[name] if isinstance(owner, type) else getattr(owner, name)
    setattr(owner, name, _timed(part, original))
    _UNDO.append(lambda: setattr(owner, name, original))


def _install() -> None:
    _replace(torch.autograd, "backward", BACKWARD)
    _replace(torch.optim.Optimizer, "zero_grad", ZERO_GRAD)
    _replace(torch.nn.Module, "zero_grad", ZERO_GRAD)
    pre = register_optimizer_step_pre_hook(lambda optimizer, args, kwargs: _begin(OPTIMIZER))
    post = register_optimizer_step_post_hook(lambda optimizer, args, kwargs: _end(OPTIMIZER))
    _UNDO.extend([pre.remove, post.remove])
