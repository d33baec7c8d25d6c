"""One collective per epoch: every rank's window reaches every rank (rank 0 logs the merge).

Collectives run only from epoch-level hooks, on every rank in the same order:
per-batch collectives deadlock as soon as ranks see different batch counts
(predict always does).
"""

from __future__ import annotations

from typing import Any, TypeVar

T = TypeVar("T")


def world_size() -> int:
    import torch.distributed as dist

    return dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1


def gather(obj: T) -> list[T]:
    """``obj`` from every rank, in rank order (just ``[obj]`` without a process group)."""
    import torch.distributed as dist

    n = world_size()
    if n < 2:
        return [obj]
    out: list[Any] = [None] * n
    dist.all_gather_object(out, obj)
    return out
