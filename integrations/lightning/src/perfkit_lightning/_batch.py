"""How many samples a batch holds: the first dimension of its first tensor.

Lightning's ``extract_batch_size`` walks the whole batch to warn about
ambiguity; a DBNet batch holds hundreds of polygon arrays, so walking it every
step would cost more than everything else the monitor does. This stops at the
first tensor, depth first, as Lightning's answer does.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import torch


def first_dim(batch: Any, depth: int = 0) -> int | None:
    """``batch``'s size, or None when it holds no tensor with a dimension."""
    if isinstance(batch, torch.Tensor):
        return int(batch.shape[0]) if batch.dim() else 1
    if depth > 8:
        return None
    if isinstance(batch, Mapping):
        items: Any = batch.values()
    elif isinstance(batch, (list, tuple)):
        items = batch
    elif dataclasses.is_dataclass(batch) and not isinstance(batch, type):
        items = (getattr(batch, f.name) for f in dataclasses.fields(batch))
    else:
        return None
    for item in items:
        n = first_dim(item, depth + 1)
        if n is not None:
            return n
    return None
