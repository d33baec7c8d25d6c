"""How many samples a batch holds: the first dimension of the first array found in it."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from typing import Any


def batch_size(batch: Any, *, of: type | tuple[type, ...] | None = None, _depth: int = 0) -> int | None:
    """The first dimension of the first array in ``batch`` (dicts, lists, tuples, dataclasses searched
    depth first), or None. ``of`` restricts what counts as an array (a Lightning batch: tensors only,
    so the numpy polygons of an OCR batch are not taken for its size).

    It stops at the first array: walking a whole batch of hundreds of polygons at every step would
    cost more than the rest of a step's instrumentation.

    >>> import numpy as np
    >>> batch_size({"image": np.zeros((8, 3)), "label": [0] * 8})
    8
    """
    if of is None or isinstance(batch, of):
        shape = getattr(batch, "shape", None)
        if isinstance(shape, Sequence) and len(shape) >= 1:
            return int(shape[0])
    if _depth > 8:
        return None
    if isinstance(batch, Mapping):
        items: Iterable[Any] = batch.values()
    elif isinstance(batch, (list, tuple)):
        items = batch
    elif dataclasses.is_dataclass(batch) and not isinstance(batch, type):
        items = (getattr(batch, f.name) for f in dataclasses.fields(batch))
    else:
        return None
    for item in items:
        n = batch_size(item, of=of, _depth=_depth + 1)
        if n is not None:
            return n
    return None
