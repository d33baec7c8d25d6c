"""What a registry dropped rather than let it poison or outgrow it, by reason (``Snapshot.dropped``).

A record with a start or end that is not an int of nanoseconds, records of new names past
``max_series``, records of new paths past the node table's bound: each is dropped, counted
exactly and said once, so a snapshot says what it is missing instead of being silently short.
"""

from __future__ import annotations

from ._context import NODES
from ._cursor import Cursor
from ._validate import MAX_PREFIXES
from ._warn import WarnOnce

INVALID = "invalid records"
NODES_FULL = "node table full"
OVER_CAP = "past max_series: "


class Losses:
    """Records a registry dropped rather than let them poison or outgrow it, by reason, exact
    since its start; each kind of loss is said once (a ``PerfkitWarning``). Prefixes past
    ``MAX_PREFIXES`` are counted together, so the table of reasons is bounded too."""

    __slots__ = ("counts", "max_series", "said")

    def __init__(self, max_series: int) -> None:
        self.counts: dict[str, int] = {}
        self.max_series = max_series
        self.said = WarnOnce()

    def add(self, reason: str, n: int, what: str = "") -> None:
        if n <= 0:
            return
        new_prefix = reason.startswith(OVER_CAP) and reason not in self.counts
        if new_prefix and sum(k.startswith(OVER_CAP) for k in self.counts) >= MAX_PREFIXES:
            reason = OVER_CAP + "(other)"
        self.counts[reason] = self.counts.get(reason, 0) + n
        kind = reason.split(":")[0]
        if kind in self.said.counts:
            self.said.counts[kind] += 1
        else:
            self.said(kind, self._message(kind, n, what))

    def _message(self, kind: str, n: int, what: str) -> str:
        if kind == OVER_CAP.rstrip(": "):
            head = (
                f"a registry holds max_series={self.max_series} series; records of new names "
                f"(first: {what!r})"
            )
        elif kind == NODES_FULL:
            head = f"{len(NODES.names):,} distinct paths of sections: records of new paths"
        else:
            head = (
                f"{n} records with a start or end that is not an int of nanoseconds within 2**61 of "
                f"zero ({what or 'check the registry clock'})"
            )
        return f"perfkit: {head} are dropped and counted in snapshot.dropped (said once)"

    def since(self, cursor: Cursor | None) -> dict[str, int]:
        """What was dropped since ``cursor``, by reason (reasons with nothing dropped left out)."""
        before = cursor.dropped if cursor else {}
        return {k: v - before.get(k, 0) for k, v in self.counts.items() if v > before.get(k, 0)}
