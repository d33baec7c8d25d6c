"""Reading a loop's numbers: how much it waits for data, and how many workers would stop that.

A loop timed with ``timed_iter(loader, NAME)`` records ``NAME.wait`` and
``NAME.step``; a loader passed to ``perfkit.torch.instrument(loader, NAME)``
also records each batch's time in its worker as ``NAME.fetch``. With ``W`` the
worker time per batch and ``C`` the loop's own time per batch (a turn minus its
wait), ``k`` workers deliver a batch every ``W / k`` while the loop asks for one
every ``C``: it stops waiting once ``k >= W / C``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ._iteration import STEP_SUFFIX, WAIT_SUFFIX
from ._snapshot import Snapshot

FETCH_SUFFIX = ".fetch"


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


def worker_count(snap: Snapshot, fetch_series: str) -> int:
    """DataLoader workers that produced batches of ``fetch_series`` in the window."""
    return len([w for w in snap.by_worker(fetch_series) if w is not None])


def workers_needed(worker_s_per_batch: float, loop_s_per_batch: float) -> int | None:
    """Workers that keep a loop from waiting: k workers deliver a batch every worker_s / k, the
    loop asks for one every loop_s. None when the loop does no work to hide the fetch behind."""
    return math.ceil(worker_s_per_batch / loop_s_per_batch) if loop_s_per_batch > 0 else None


def loop_stats(snap: Snapshot, name: str) -> LoopStats | None:
    """The numbers of loop ``name`` in ``snap``; None when it has no turn in the window."""
    wait, step = snap.get(name + WAIT_SUFFIX), snap.get(name + STEP_SUFFIX)
    if wait is None or step is None or step.total_s <= 0:
        return None
    # A turn is one wait plus the loop's body; the body is what the loop itself costs.
    loop_mean = max(0.0, step.mean_s - wait.mean_s)
    share = min(1.0, wait.total_s / step.total_s)
    fetch = snap.get(name + FETCH_SUFFIX)
    if fetch is None:
        return LoopStats(name, wait.count, wait.mean_s, loop_mean, share)
    workers = worker_count(snap, name + FETCH_SUFFIX)
    needed = workers_needed(fetch.mean_s, loop_mean)
    return LoopStats(name, wait.count, wait.mean_s, loop_mean, share, fetch.mean_s, workers, needed)


def all_loops(snap: Snapshot) -> list[LoopStats]:
    """Every loop of the snapshot, largest total wait first."""
    names = [n[: -len(WAIT_SUFFIX)] for n in snap if n.endswith(WAIT_SUFFIX)]
    return [s for s in (loop_stats(snap, n) for n in names) if s is not None]
