"""One collective per epoch: every rank's window reaches every rank (rank 0 logs the merge).

Collectives run only from epoch-level hooks, on every rank in the same order:
per-batch collectives deadlock as soon as ranks see different batch counts
(predict always does).

``gather`` sends each rank's whole window (pickled, samples included) to every rank: its bytes
grow with ranks x series x samples. ``start_merge`` is the fixed-size form: fixed-length count
vectors summed over ranks (``perfkit._sketch``'s buckets) and one fixed-length row per rank (one
float per account part), launched without blocking and collected with a timeout, so a dead or
lagging rank costs the others ``timeout_s``, not the fit.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

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


@dataclass
class Merge:
    """A merge in flight (``start_merge``): ``result`` waits for it, at most ``timeout_s``."""

    works: list[Any]
    sums: Any  # torch.Tensor: the counts, summed over ranks once done
    rows: list[Any]  # torch.Tensor per rank: each rank's row once done

    def result(self, timeout_s: float) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]] | None:
        """The counts summed over ranks and every rank's row (ranks x row), or None when some rank
        did not answer within ``timeout_s`` (the caller keeps its own rank's figures)."""
        try:
            for work in self.works:
                work.wait(timeout=timedelta(seconds=timeout_s))
        except RuntimeError:  # gloo's timeout: a rank died or lags; training goes on without it
            return None
        return self.sums.numpy(), np.stack([r.numpy() for r in self.rows])


def start_merge(counts: npt.NDArray[np.int64], row: npt.NDArray[np.float64]) -> Merge:
    """Launch the fixed-size merge of this rank's ``counts`` (summed over ranks) and ``row`` (one per
    rank), on every rank in the same order, without waiting for it.

    Each rank sends ``counts`` once and its ``row`` to every rank: bytes per rank grow with the
    number of ranks by the rows alone (a few floats each).
    """
    import torch
    import torch.distributed as dist

    sums = torch.from_numpy(np.ascontiguousarray(counts, dtype=np.int64)).clone()
    mine = torch.from_numpy(np.ascontiguousarray(row, dtype=np.float64)).clone()
    n = world_size()
    if n < 2:
        return Merge([], sums, [mine])
    rows = [torch.empty_like(mine) for _ in range(n)]
    works = [
        dist.all_reduce(sums, op=dist.ReduceOp.SUM, async_op=True),
        dist.all_gather(rows, mine, async_op=True),
    ]
    return Merge(works, sums, rows)
