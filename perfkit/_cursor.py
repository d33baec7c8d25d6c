"""Cursors, and how a snapshot is cut from a registry's state since one.

A cursor copies every running total (per series, per node of the tree, per
gauge); a snapshot subtracts them from the current totals and takes the
retained samples written since, so a window (the records since a cursor) has exact
counts and totals even where its ring overwrote samples. Kept apart from the registry,
which only stores and drains.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ._context import NODES, ThreadInfo
from ._gauges import GaugeData, GaugeRing
from ._ring import I64, Marks, Ring
from ._snapshot import NodeTotals, Path, Recursion
from ._stats import SeriesData, m2_of
from .names import recursed_name


@dataclass(frozen=True)
class Cursor:
    """A point in a registry's record stream; ``snapshot(since=cursor)`` covers what came after.

    >>> import perfkit
    >>> reg = perfkit.Registry()
    >>> start = reg.cursor()
    >>> reg.snapshot(since=start)
    Snapshot(0 series: ; ... s window)
    """

    t_ns: int
    registry_id: int
    generation: int
    series: dict[str, Marks] = field(repr=False)
    nodes: dict[int, tuple[int, int, int]] = field(repr=False)
    gauges: dict[str, tuple[int, float]] = field(repr=False)
    dropped_in_transfer: int = 0
    dropped: dict[str, int] = field(default_factory=dict, repr=False)


class ThreadTable:
    """Numbers the threads that a snapshot's samples came from."""

    def __init__(self) -> None:
        self.infos: list[ThreadInfo] = []
        self._index: dict[int, int] = {}

    def index_of_root(self, root: int) -> int:
        idx = self._index.get(root)
        if idx is None:
            idx = self._index[root] = len(self.infos)
            self.infos.append(NODES.threads[root])
        return idx

    def indexes(self, nodes: I64) -> I64:
        # Only the nodes at hand are looked up: the cost follows the window, not the node table.
        uniq, inv = np.unique(nodes, return_inverse=True)
        roots = NODES.roots
        numbers = np.array([self.index_of_root(roots[n]) for n in uniq.tolist()], dtype=np.int64)
        return numbers[inv].reshape(-1) if len(uniq) else np.zeros(0, np.int64)


def series_window(ring: Ring, marks: Marks | None, threads: ThreadTable) -> SeriesData | None:
    base = marks or Marks(0, 0, 0, 0, 0.0)
    count = ring.written - base.written
    if count <= 0:
        return None
    kept = ring.retained_since(base.written)
    complete = len(kept.durations_ns) == count
    if complete or marks is not None:
        lo, hi = int(kept.durations_ns.min()), int(kept.durations_ns.max())
    else:
        lo, hi = ring.min_ns, ring.max_ns
    return SeriesData(
        count=count,
        total_ns=ring.total_ns - base.total_ns,
        errors=ring.errors - base.errors,
        m2=m2_of(kept.durations_ns) if complete else ring.window_m2(marks),
        min_ns=lo,
        max_ns=hi,
        durations_ns=kept.durations_ns,
        starts_ns=kept.starts_ns,
        threads=threads.indexes(kept.nodes),
        sample_errors=kept.errors,
    )


def series_windows(
    rings: dict[str, Ring], since: Cursor | None, threads: ThreadTable
) -> dict[str, SeriesData]:
    """Every series with records in the window since ``since`` (or since the start); a recursion's
    re-entries are not a series of their own (``recursion_windows``)."""
    out = {}
    for name, ring in rings.items():
        if recursed_name(name) is not None:
            continue
        data = series_window(ring, since.series.get(name) if since else None, threads)
        if data is not None:
            out[name] = data
    return out


def gauge_windows(gauges: dict[str, GaugeRing], since: Cursor | None) -> dict[str, GaugeData]:
    out = {}
    for name, ring in gauges.items():
        written, total = since.gauges.get(name, (0, 0.0)) if since else (0, 0.0)
        data = ring.window(written, total)
        if data is not None:
            out[name] = data
    return out


def node_windows(
    nodes: dict[int, list[int]], since: Cursor | None, threads: ThreadTable
) -> tuple[dict[Path, NodeTotals], dict[tuple[int, str], NodeTotals], dict[int, int]]:
    """Exact totals of the window per path of the tree (threads merged) and per (thread, name), and
    the count of each fold (recursion) node's records."""
    tree: dict[Path, NodeTotals] = {}
    per_thread: dict[tuple[int, str], NodeTotals] = {}
    folded: dict[int, int] = {}
    before = since.nodes if since else {}
    names, overlay, roots, folds = NODES.names, NODES.overlay, NODES.roots, NODES.folds
    for node, (count, total, errors) in nodes.items():
        c0, t0, e0 = before.get(node, (0, 0, 0))
        if count <= c0:
            continue
        if node in folds:
            folded[node] = count - c0
            continue
        totals = NodeTotals(count - c0, total - t0, errors - e0)
        key = (threads.index_of_root(roots[node]), names[node])
        per_thread[key] = per_thread[key] + totals if key in per_thread else totals
        if not overlay[node]:
            path = NODES.path(node)
            tree[path] = tree[path] + totals if path in tree else totals
    return tree, per_thread, folded


def recursion_windows(
    rings: dict[str, Ring], since: Cursor | None, folded: dict[int, int]
) -> dict[Path, Recursion]:
    """Each fold's re-entries in the window (``folded``: their count per fold node), by the path they
    were made at, with the depth their retained records reached."""
    out: dict[Path, Recursion] = {}
    kept = {}
    for node, count in folded.items():
        series = NODES.names[node]
        if series not in kept:
            marks = since.series.get(series) if since else None
            kept[series] = rings[series].retained_since(marks.written if marks else 0)
        mine = kept[series].nodes == node
        depth = 1 + max_open(kept[series].starts_ns[mine], kept[series].durations_ns[mine])
        path = (*NODES.path(NODES.folds[node]), recursed_name(series) or series)
        out[path] = out[path] + Recursion(count, depth) if path in out else Recursion(count, depth)
    return out


def max_open(starts: I64, durations: I64) -> int:
    """The most records open at one instant, a record open from its start to its end included: at a
    clock too coarse to tell them apart, calls that start together are taken as nested (recursion's
    case), not as one ending as the next starts.

    >>> import numpy as np
    >>> max_open(np.array([0, 1, 2, 5]), np.array([10, 8, 1, 1]))  # [2, 3) inside [1, 9) inside [0, 10)
    3
    """
    if not len(starts):
        return 0
    times = np.concatenate([starts + durations, starts])
    steps = np.concatenate([np.full(len(starts), -1, np.int64), np.ones(len(starts), np.int64)])
    order = np.lexsort((-steps, times))  # at one instant, starts first
    return int(np.cumsum(steps[order]).max())
