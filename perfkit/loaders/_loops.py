"""Reading a loop's numbers: how much it waits for data, and how many workers would stop that.

A loop timed with ``timed_iter(loader, NAME)`` records ``NAME.data.wait`` and
``NAME.loop.turn``; a loader passed to ``perfkit.torch.instrument(loader, NAME)``
also records each batch's time in its worker as ``NAME.data.fetch``. With ``W`` the
worker time per batch and ``C`` the loop's own time per batch (a turn minus its
wait), ``k`` workers deliver a batch every ``W / k`` while the loop asks for one
every ``C``: it stops waiting once ``k >= W / C``. Workers share the machine's
cores with the loop, so more workers than cores cannot run at once: ``cores_for_workers``
says how many can.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

from .._snapshot import Snapshot
from ..names import TURN, fetch_series, turn_series, wait_series


@dataclass(frozen=True)
class LoopStats:
    """One ``timed_iter`` loop over a window.

    ``wait_share`` is the fraction of the loop's time spent waiting for items. The worker fields
    are set when the loader was instrumented: ``workers_needed`` is the smallest worker count
    that would keep the loop from waiting, from the measured times (``None`` when the loop does
    no work of its own to hide the fetch behind).
    """

    name: str
    items: int
    wait_mean_s: float
    loop_mean_s: float
    wait_share: float
    worker_mean_s: float | None = None
    workers: int | None = None
    workers_needed: int | None = None


def worker_count(snap: Snapshot, fetch: str) -> int:
    """DataLoader workers that produced batches of series ``fetch`` in the window."""
    return len([w for w in snap.by_worker(fetch) if w is not None])


def cores_for_workers() -> int:
    """Cores this process may use, less one for the training loop itself (at least 1).

    >>> cores_for_workers() >= 1
    True
    """
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    return max(1, cores - 1)


def workers_needed(worker_s_per_batch: float, loop_s_per_batch: float) -> int | None:
    """Workers that keep a loop from waiting: k workers deliver a batch every worker_s / k, the
    loop asks for one every loop_s. None when the loop does no work to hide the fetch behind.

    >>> workers_needed(0.030, 0.010)
    3
    """
    return math.ceil(worker_s_per_batch / loop_s_per_batch - 1e-9) if loop_s_per_batch > 0 else None


def loop_stats(snap: Snapshot, name: str) -> LoopStats | None:
    """The numbers of loop ``name`` in ``snap``; None when it has no turn in the window."""
    wait, turn = snap.get(wait_series(name)), snap.get(turn_series(name))
    if wait is None or turn is None or turn.total_s <= 0:
        return None
    # A turn is one wait plus the loop's body; the body is what the loop itself costs.
    loop_mean = max(0.0, turn.mean_s - wait.mean_s)
    share = min(1.0, wait.total_s / turn.total_s)
    fetch = snap.get(fetch_series(name))
    if fetch is None:
        return LoopStats(name, wait.count, wait.mean_s, loop_mean, share)
    workers = worker_count(snap, fetch_series(name))
    needed = workers_needed(fetch.mean_s, loop_mean)
    return LoopStats(name, wait.count, wait.mean_s, loop_mean, share, fetch.mean_s, workers, needed)


def all_loops(snap: Snapshot) -> list[LoopStats]:
    """Every ``timed_iter`` loop of the snapshot."""
    names = [n[: -len(TURN)] for n in snap if n.endswith(TURN)]
    found = [loop_stats(snap, n) for n in names if wait_series(n) in snap]
    return [s for s in found if s is not None]
