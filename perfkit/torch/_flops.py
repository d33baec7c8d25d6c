"""``count_flops``: a real step's FLOPs, counted once by torch's ``FlopCounterMode``, split by dtype.

    with perfkit.torch.count_flops() as counted:   # one real step: it trains as any other
        loss = model(batch).sum(); loss.backward(); opt.step()
    counted.total                                   # 6 * params * tokens for a transformer, give or take
    counted.by_dtype                                # {"bf16": ..., "fp32": ...}: which peak each ran at

No FLOP is counted by hand: ``torch.utils.flop_counter.FlopCounterMode`` counts what torch
dispatches (matmuls, convolutions, attention; forward and backward), on CPU as on CUDA. Its
total does not say which dtype each matmul ran in, and the peak differs 16x between an H100's
fp32 and bf16, so a small dispatch mode stacked above it reads the counter's total before and
after each op it counts and books the difference to the dtype of the op's first floating
operand (autocast has already cast them when the op reaches it). A float32 matmul books to
``tf32`` where torch lets it use TF32 (``torch.backends.cuda.matmul.allow_tf32`` /
``set_float32_matmul_precision("high")``; cuDNN's ``allow_tf32`` for convolutions, on by
default), and only when the operands are on a CUDA device: on a CPU, float32 is float32.

Counting slows the counted step (every op goes through Python twice): count one step, not every
step. ``torch.compile``'d regions are counted as far as ``FlopCounterMode`` sees into them.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import FlopCounterMode, flop_registry

from .._peaks import dtype_key

_CONVOLUTIONS = ("convolution", "convolution_backward", "_convolution", "cudnn_convolution")


@dataclass
class FlopCount:
    """What ``count_flops`` counted: the total and its split by the dtype each op ran in.

    >>> FlopCount(10, {"bf16": 8, "fp32": 2}).shares()
    {'bf16': 0.8, 'fp32': 0.2}
    """

    total: int = 0
    by_dtype: dict[str, int] = field(default_factory=dict)

    def shares(self) -> dict[str, float]:
        """Each dtype's share of the total."""
        return {k: v / self.total for k, v in self.by_dtype.items()} if self.total else {}


def _operand_dtype(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> Any:
    """The first floating tensor operand, searched in args then kwargs, one level into lists."""
    for value in (*args, *kwargs.values()):
        for item in value if isinstance(value, (list, tuple)) else (value,):
            if isinstance(item, torch.Tensor) and item.is_floating_point():
                return item
    return None


def _kind(func: Any, operand: Any) -> str:
    """The table's dtype name for one op: fp32 becomes tf32 where torch lets a CUDA op use TF32."""
    if operand is None:
        return "unknown"
    key = dtype_key(operand.dtype) or str(operand.dtype).removeprefix("torch.")
    if key != "fp32" or not operand.is_cuda:
        return key
    name = func.__name__.split(".")[0]
    if name in _CONVOLUTIONS:
        return "tf32" if torch.backends.cudnn.allow_tf32 else "fp32"
    if torch.get_float32_matmul_precision() != "highest" or torch.backends.cuda.matmul.allow_tf32:
        return "tf32"
    return "fp32"


class _ByDtype(TorchDispatchMode):  # type: ignore[no-untyped-call]
    """Above a ``FlopCounterMode``: books each counted op's FLOPs to its operands' dtype."""

    def __init__(self, counter: FlopCounterMode, count: FlopCount) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.counter = counter
        self.count = count

    def __torch_dispatch__(
        self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Mapping[str, Any] | None = None
    ) -> Any:
        kwargs = kwargs or {}
        if func._overloadpacket not in flop_registry:
            return func(*args, **kwargs)
        before = self.counter.get_total_flops()
        out = func(*args, **kwargs)  # the FlopCounterMode below counts it
        added = self.counter.get_total_flops() - before
        if added:
            kind = _kind(func, _operand_dtype(args, kwargs))
            self.count.by_dtype[kind] = self.count.by_dtype.get(kind, 0) + added
        return out


@contextmanager
def count_flops() -> Iterator[FlopCount]:
    """Count the FLOPs of the block (one real step) with ``FlopCounterMode``, split by dtype.

    The returned ``FlopCount`` is filled when the block ends. Give ``total`` to MFU as the FLOPs
    per step and ``by_dtype`` to ``perfkit.resources.mixed_peak`` for the peak they run at.

    >>> import torch, perfkit.torch
    >>> a, b = torch.ones(64, 32), torch.ones(32, 16)
    >>> with perfkit.torch.count_flops() as counted:
    ...     _ = a @ b
    >>> counted.total == 2 * 64 * 32 * 16, counted.by_dtype
    (True, {'fp32': 65536})
    """
    count = FlopCount()
    counter = FlopCounterMode(display=False)
    with counter, _ByDtype(counter, count):
        yield count
    count.total = int(counter.get_total_flops())
