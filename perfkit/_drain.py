"""The drain: a batch of pending records, as numpy columns, grouped by series into their rings.

Doing this in batches is what keeps recording to an append: numpy turns a few thousand records
into columns in one pass, one ``bincount`` gives every node's count and totals, and each
series receives its records in one ``Ring.extend``. Nothing can poison a ring on the way:
records with a time past ``TIME_LIMIT``, a node that is not of this process's table, or a new
name past ``max_series`` are dropped and counted (``Losses``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from ._context import NODES, OVERFLOW
from ._dropped import INVALID, NODES_FULL, OVER_CAP, Losses
from ._ring import I64, Bools, Ring
from ._validate import TIME_LIMIT, name_prefix
from .names import is_stage_series

Columns = tuple[I64, I64, I64, Bools]
Counts = npt.NDArray[Any]  # bincount's output: ints, or floats with weights
"""Records as columns, oldest first: nodes, starts, durations (ns), error flags."""
STAGE_ROOM = 1000
"""Series of perfkit's own (``STAGE.step``, ``LOADER.data.wait``) admitted past ``max_series``."""


def columns(flat: I64, lost: Losses) -> Columns:
    """Flat (node or ~node, start, end) triplets as columns; records with a time past
    ``TIME_LIMIT`` are dropped and counted. Durations are clamped at zero."""
    arr = flat.reshape(-1, 3)
    raw = arr[:, 0]
    errors = raw < 0
    nodes = np.where(errors, ~raw, raw) if errors.any() else raw
    starts, ends = arr[:, 1], arr[:, 2]
    if len(arr) and (int(flat.min()) < -TIME_LIMIT or int(flat.max()) > TIME_LIMIT):
        keep: Bools = (
            (starts >= -TIME_LIMIT) & (starts <= TIME_LIMIT) & (ends >= -TIME_LIMIT) & (ends <= TIME_LIMIT)
        )
        lost.add(INVALID, len(keep) - int(np.count_nonzero(keep)))
        nodes, starts, ends, errors = nodes[keep], starts[keep], ends[keep], errors[keep]
    return nodes, starts, np.maximum(ends - starts, 0), errors


def known(cols: Columns, lost: Losses) -> Columns:
    """The records whose node is of this process's table; ``OVERFLOW`` and the rest are counted."""
    nodes = cols[0]
    if not len(nodes) or (int(nodes.min()) > OVERFLOW and int(nodes.max()) < len(NODES.names)):
        return cols
    keep: Bools = (nodes > OVERFLOW) & (nodes < len(NODES.names))
    full = int(np.count_nonzero(nodes == OVERFLOW))
    lost.add(NODES_FULL, full)
    lost.add(INVALID, len(nodes) - int(np.count_nonzero(keep)) - full)
    n, s, d, e = cols
    return n[keep], s[keep], d[keep], e[keep]


class SeriesTable:
    """A registry's series: each name's ring, and exact running totals per node of the tree
    (count, total ns, errors), which cursors copy and snapshots subtract."""

    __slots__ = ("capacity", "lost", "max_series", "nodes", "rings")

    def __init__(self, capacity: int, max_series: int, lost: Losses) -> None:
        self.capacity = capacity
        self.max_series = max_series
        self.lost = lost
        self.rings: dict[str, Ring] = {}
        self.nodes: dict[int, list[int]] = {}

    def clear(self) -> None:
        self.rings.clear()
        self.nodes.clear()

    def add(self, nodes: I64, starts: I64, durations: I64, errors: Bools) -> None:
        """Append columns of records (oldest first); those of a node not in this process's table are
        counted instead (``known``)."""
        if not len(nodes):
            return
        top = int(nodes.max())
        # bincount sizes its output by the largest node: past a few per record, count the
        # distinct nodes instead, so the cost per record does not grow with the node table.
        if top <= 4 * len(nodes) + 4096:
            counts = np.bincount(nodes)
            present, ids = np.flatnonzero(counts), nodes
        else:
            present, ids = np.unique(nodes, return_inverse=True)
            ids = ids.reshape(-1)
            counts = np.bincount(ids)
        if int(present[0]) <= OVERFLOW or top >= len(NODES.names):  # a full table, or not ours
            self.add(*known((nodes, starts, durations, errors), self.lost))
            return
        totals = np.bincount(ids, weights=durations)
        errs = np.bincount(ids, weights=errors) if errors.any() else np.zeros(len(counts))
        groups, group, over = self._admit(present, ids is nodes, counts, totals, errs)
        if over:
            keep = ~np.isin(ids, over)
            nodes, starts, durations, errors, ids = (
                nodes[keep],
                starts[keep],
                durations[keep],
                errors[keep],
                ids[keep],
            )
        if len(groups) == 1:
            self.rings[groups[0]].extend(starts, durations, nodes, errors)
            return
        per_record = group[ids]
        order = np.argsort(per_record, kind="stable")
        bounds = np.searchsorted(per_record[order], np.arange(len(groups) + 1))
        for g, name in enumerate(groups):
            idx = order[bounds[g] : bounds[g + 1]]
            self.rings[name].extend(starts[idx], durations[idx], nodes[idx], errors[idx])

    def _admit(
        self, present: I64, by_node: bool, counts: Counts, totals: Counts, errs: Counts
    ) -> tuple[list[str], I64, list[int]]:
        """Add each present node's totals and give it its series' group (a ring made for a new
        name); a new name past ``max_series`` is refused and counted. Returns the names by group,
        the group of each id (a node, or with ``by_node`` false an index into ``present``), and
        the ids refused."""
        names, rings = NODES.names, self.rings
        group_of_name: dict[str, int] = {}
        group = np.zeros(len(counts), dtype=np.int64)
        over: list[int] = []
        for k, node in enumerate(present.tolist()):
            i = node if by_node else k
            name = names[node]
            if name not in rings and len(rings) >= self.max_series and not self._reserved(name):
                over.append(i)
                self.lost.add(OVER_CAP + name_prefix(name), int(counts[i]), name)
                continue
            mark = self.nodes.setdefault(node, [0, 0, 0])
            mark[0] += int(counts[i])
            mark[1] += round(totals[i])
            mark[2] += round(errs[i])
            group[i] = group_of_name.setdefault(name, len(group_of_name))
            if name not in rings:
                rings[name] = Ring(self.capacity)
        return list(group_of_name), group, over

    def _reserved(self, name: str) -> bool:
        """perfkit's own stage and loader series stay admitted past ``max_series`` (up to
        ``STAGE_ROOM`` more), so a program's own names can never take a monitor's step times."""
        return len(self.rings) < self.max_series + STAGE_ROOM and is_stage_series(name)
