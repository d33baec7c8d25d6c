"""Planted step parts, timed by the test's own clock: a slow forward, a slow backward (a custom
autograd Function), a slow optimizer step, slow code after the step.

Each planted piece adds its own seconds to ``TRUTH`` with ``time.perf_counter`` around exactly
what perfkit should call that part: the forward pass and the loss; the backward pass; the
optimizer's own step (the closure it runs is not its own); zero_grad. The tests compare perfkit's
account of each part with these sums, never with perfkit's own output.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch


class Truth:
    """Seconds per part, measured by the test."""

    def __init__(self) -> None:
        self.seconds: defaultdict[str, float] = defaultdict(float)

    def reset(self) -> None:
        self.seconds.clear()

    @contextmanager
    def part(self, name: str) -> Iterator[None]:
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[name] += time.perf_counter() - t0


TRUTH = Truth()


def sleep(seconds: float) -> None:
    if seconds:
        time.sleep(seconds)


class SlowBackward(torch.autograd.Function):
    """Identity forward; its backward sleeps ``seconds`` (a second-order term, a custom kernel)."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, seconds: float) -> torch.Tensor:
        ctx.seconds = seconds
        return x.view_as(x)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        sleep(ctx.seconds)
        return grad, None


class SlowSGD(torch.optim.SGD):
    """SGD whose own step takes ``step_s`` longer (an EMA of the weights, a heavy clip); a closure
    it is given runs first and is not the optimizer's time. Its own time goes to ``TRUTH``."""

    def __init__(self, params: Any, lr: float, step_s: float = 0.0) -> None:
        super().__init__(params, lr=lr)
        self.step_s = step_s

    def step(self, closure: Callable[[], Any] | None = None) -> Any:  # type: ignore[override]
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        with TRUTH.part("optimizer"):
            super().step()
            sleep(self.step_s)
        return loss
