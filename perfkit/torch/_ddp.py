"""The collectives that merge ranks, once per stage epoch: every rank's window reaches every rank.

Collectives run only from epoch-level hooks, on every rank in the same order:
per-batch collectives deadlock as soon as ranks see different batch counts
(predict always does). They are perfkit's, not the training's: called ``untimed``, so no
collective's wait of theirs is in an epoch's account.

``TorchRanks`` (``perfkit.torch.gather_ranks``) is the transport of ``perfkit.stages``' merge:
async collectives collected by one deadline, and the process group's store to name the ranks that
did not arrive (see ``perfkit.stages._merge`` for what travels). Called as a function it is
``gather``: each rank's whole window (pickled, samples included) to every rank, bytes growing with
ranks x series x samples, and no timeout.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Sequence
from datetime import timedelta
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

from .._validate import check_int, check_number
from ..stages import EXACT_MAX
from ._collectives import untimed

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
    untimed(dist.all_gather_object)(out, obj)
    return out


class TorchRanks:
    """The merge's collectives on ``torch.distributed``'s default group (gloo or NCCL), each
    collected within ``timeout_s`` of its launch; up to ``exact_max`` ranks every rank's whole
    epoch travels, above it fixed-size sketches; see the module. Called as ``gather`` it is the
    plain ``all_gather_object`` (no timeout).

    >>> TorchRanks(timeout_s=0)
    Traceback (most recent call last):
    ...
    ValueError: timeout_s must be a finite number > 0.0, got 0
    """

    def __init__(self, timeout_s: float = 300.0, *, exact_max: int = EXACT_MAX) -> None:
        self.timeout_s = check_number(timeout_s, "timeout_s")
        self.exact_max = check_int(exact_max, "exact_max", low=1)
        self._round = 0
        self._deadline = 0.0

    def __repr__(self) -> str:
        return f"TorchRanks(timeout_s={self.timeout_s:g}, exact_max={self.exact_max})"

    def __call__(self, obj: T) -> list[T]:
        return gather(obj)

    def world(self) -> int:
        return world_size()

    def rank(self) -> int:
        import torch.distributed as dist

        return dist.get_rank() if world_size() > 1 else 0

    def all_gather_ints(self, row: npt.NDArray[np.int64]) -> npt.NDArray[np.int64] | None:
        import torch
        import torch.distributed as dist

        mine = torch.from_numpy(np.ascontiguousarray(row, dtype=np.int64)).to(_device())
        out = [torch.empty_like(mine) for _ in range(world_size())]
        self._arrive()
        if not self._wait([untimed(dist.all_gather)(out, mine, async_op=True)]):
            return None
        return np.stack([o.cpu().numpy() for o in out])

    def all_gather_bytes(self, blob: bytes, sizes: Sequence[int]) -> list[bytes] | None:
        import torch
        import torch.distributed as dist

        size = max(max(sizes), 1)
        out = [torch.empty(size, dtype=torch.uint8, device=_device()) for _ in sizes]
        self._arrive()
        if not self._wait([untimed(dist.all_gather)(out, _padded(blob, size), async_op=True)]):
            return None
        return [bytes(o.cpu().numpy()[:n]) for o, n in zip(out, sizes, strict=True)]

    def exchange(
        self,
        sums: npt.NDArray[np.int64],
        mins: npt.NDArray[np.int64],
        fsums: npt.NDArray[np.float64],
        row: npt.NDArray[np.float64],
        blob: bytes,
        sources: dict[int, int],
    ) -> (
        tuple[
            npt.NDArray[np.int64],
            npt.NDArray[np.int64],
            npt.NDArray[np.float64],
            npt.NDArray[np.float64],
            dict[int, bytes],
        ]
        | None
    ):
        import torch
        import torch.distributed as dist

        device = _device()
        t_sums, t_mins, t_fsums, t_row = (
            torch.from_numpy(a.copy()).to(device) for a in (sums, mins, fsums, row)
        )
        rows = [torch.empty_like(t_row) for _ in range(world_size())]
        me = self.rank()
        bufs = {
            r: _padded(blob, n) if r == me else torch.empty(max(n, 1), dtype=torch.uint8, device=device)
            for r, n in sources.items()
        }
        self._arrive()
        all_reduce, all_gather, broadcast = (
            untimed(dist.all_reduce),
            untimed(dist.all_gather),
            untimed(dist.broadcast),
        )
        works = [
            all_reduce(t_sums, op=dist.ReduceOp.SUM, async_op=True),
            all_reduce(t_mins, op=dist.ReduceOp.MIN, async_op=True),
            all_reduce(t_fsums, op=dist.ReduceOp.SUM, async_op=True),
            all_gather(rows, t_row, async_op=True),
            *(broadcast(buf, src=r, async_op=True) for r, buf in bufs.items()),
        ]
        if not self._wait(works):
            return None
        return (
            t_sums.cpu().numpy(),
            t_mins.cpu().numpy(),
            t_fsums.cpu().numpy(),
            np.stack([r.cpu().numpy() for r in rows]),
            {r: bytes(buf.cpu().numpy()[: sources[r]]) for r, buf in bufs.items()},
        )

    def missing(self) -> tuple[int, ...]:
        """The ranks whose mark in the store is not this round's by the round's deadline: they
        never reached it. (A collective can fail before its deadline, as soon as a dead peer's
        connection closes: the ranks still on their way are waited for until then.)"""
        store = _store()
        if store is None:
            return ()
        mark = str(self._round).encode()
        absent = list(range(world_size()))
        try:
            while True:
                absent = [r for r in absent if not store.check([_key(r)]) or store.get(_key(r)) != mark]
                if not absent or time.monotonic() >= self._deadline:
                    return tuple(absent)
                time.sleep(0.05)
        except Exception:  # the store is down too: who is missing cannot be told
            return ()

    def _arrive(self) -> None:
        """Mark this rank's arrival at the next round in the store (what ``missing`` reads)."""
        self._round += 1
        self._deadline = time.monotonic() + self.timeout_s
        store = _store()
        if store is not None:
            # the store is only for naming the missing: the merge goes on without it
            with contextlib.suppress(Exception):
                store.set(_key(self.rank()), str(self._round))

    def _wait(self, works: Sequence[Any]) -> bool:
        """Whether every work finished by the round's deadline (``timeout_s`` after its start)."""
        deadline = self._deadline
        try:
            for work in works:
                left = max(deadline - time.monotonic(), 0.001)
                work.wait(timeout=timedelta(seconds=left))
        except RuntimeError:  # the backend's timeout, or a dead peer's connection closed
            return False
        return True


def _device() -> Any:
    import torch
    import torch.distributed as dist

    return torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" else "cpu"


def _padded(blob: bytes, size: int) -> Any:
    import torch

    buf = np.zeros(max(size, 1), dtype=np.uint8)
    buf[: len(blob)] = np.frombuffer(blob, dtype=np.uint8)
    return torch.from_numpy(buf).to(_device())


def _key(rank: int) -> str:
    return f"perfkit/merge/{rank}"


def _store() -> Any:
    try:
        from torch.distributed.distributed_c10d import _get_default_store

        return _get_default_store()
    except Exception:  # no group, or a torch without it: missing ranks cannot be named
        return None
