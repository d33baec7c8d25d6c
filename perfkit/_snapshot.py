"""Snapshots: an immutable view of a registry's records over one window.

A snapshot is a mapping from series name to ``Stats``. It also keeps what the
statistics were computed from (retained samples, exact totals, the section
tree and the threads the records came from), so that it can be written as
JSON, read back, merged with the snapshots of other processes or ranks, drawn
as a Chrome trace, and printed as a tree.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from ._context import ThreadInfo
from ._gauges import GaugeData, GaugeStats
from ._stats import SeriesData, Stats, combine

_FORMAT = 1


@dataclass(frozen=True)
class NodeTotals:
    """Exact totals of the records made at one path of the section tree."""

    count: int
    total_ns: int
    errors: int

    def __add__(self, other: NodeTotals) -> NodeTotals:
        return NodeTotals(
            self.count + other.count, self.total_ns + other.total_ns, self.errors + other.errors
        )


Path = tuple[str, ...]


class Snapshot(Mapping[str, Stats]):
    """Statistics per series over a window; immutable, JSON-serialisable and mergeable.

    >>> import perfkit
    >>> reg = perfkit.Registry()
    >>> start = reg.cursor()
    >>> with perfkit.section("epoch", registry=reg):
    ...     pass
    >>> snap = reg.snapshot(since=start)
    >>> snap["epoch"].count, ("epoch",) in snap.tree
    (1, True)
    >>> perfkit.Snapshot.from_json(snap.to_json()) == snap
    True
    """

    __slots__ = (
        "_gauges",
        "_series",
        "_stats",
        "dropped_in_transfer",
        "end_ns",
        "gauges",
        "start_ns",
        "thread_totals",
        "threads",
        "tree",
    )

    def __init__(
        self,
        series: Mapping[str, SeriesData],
        *,
        tree: Mapping[Path, NodeTotals] | None = None,
        threads: Sequence[ThreadInfo] = (),
        thread_totals: Mapping[tuple[int, str], NodeTotals] | None = None,
        gauges: Mapping[str, GaugeData] | None = None,
        start_ns: int = 0,
        end_ns: int = 0,
        dropped_in_transfer: int = 0,
    ) -> None:
        self._series = dict(sorted(series.items(), key=lambda kv: -kv[1].total_ns))
        self._stats = {name: data.stats() for name, data in self._series.items()}
        self.tree: Mapping[Path, NodeTotals] = dict(tree or {})
        self.threads: tuple[ThreadInfo, ...] = tuple(threads)
        self.thread_totals: Mapping[tuple[int, str], NodeTotals] = dict(thread_totals or {})
        """Exact totals per (index into ``threads``, series name): what ``by_thread`` counts."""
        self.dropped_in_transfer = dropped_in_transfer
        """Records that DataLoader workers dropped in this window because the main process fell behind."""
        self.start_ns = start_ns
        self.end_ns = end_ns
        self._gauges = dict(sorted((gauges or {}).items()))
        self.gauges: Mapping[str, GaugeStats] = {k: g.stats(start_ns) for k, g in self._gauges.items()}
        """Gauge series (memory, utilisation) sampled in the window, by name."""

    # Mapping protocol: iteration goes from the largest total time to the smallest.
    def __getitem__(self, name: str) -> Stats:
        return self._stats[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._stats)

    def __len__(self) -> int:
        return len(self._stats)

    def __repr__(self) -> str:
        names = ", ".join(list(self._stats)[:5])
        more = ", ..." if len(self._stats) > 5 else ""
        return f"Snapshot({len(self)} series: {names}{more}; {self.duration_s:.3f} s window)"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Snapshot):
            return NotImplemented
        return (
            self._series.keys() == other._series.keys()
            and all(self._series[k].same_as(other._series[k]) for k in self._series)
            and self.tree == other.tree
            and self.threads == other.threads
            and self.thread_totals == other.thread_totals
            and self.dropped_in_transfer == other.dropped_in_transfer
            and self._gauges.keys() == other._gauges.keys()
            and all(self._gauges[k].same_as(other._gauges[k]) for k in self._gauges)
            and (self.start_ns, self.end_ns) == (other.start_ns, other.end_ns)
        )

    __hash__ = None  # type: ignore[assignment]

    @property
    def duration_s(self) -> float:
        """Length of the window, from its cursor (or the registry's start) to the snapshot."""
        return (self.end_ns - self.start_ns) / 1e9

    def data(self, name: str) -> SeriesData:
        """The retained samples and exact totals behind ``self[name]``."""
        return self._series[name]

    def by_thread(self, name: str) -> dict[ThreadInfo, Stats]:
        """``self[name]`` split by the thread (and process) the records came from.

        Count, total and errors are exact; percentiles come from each thread's retained samples.
        """
        data = self._series[name]
        out = {}
        for (ti, series), totals in self.thread_totals.items():
            if series == name:
                out[self.threads[ti]] = data.subset(
                    data.threads == ti, totals.count, totals.total_ns, totals.errors
                )
        return {t: d.stats() for t, d in sorted(out.items(), key=lambda kv: -kv[1].total_ns)}

    def by_worker(self, name: str) -> dict[int | None, Stats]:
        """``self[name]`` split by DataLoader worker id (``None``: records of the main process).

        Workers restarted each epoch get new pids but keep their ids, so they are grouped by id.
        """
        data = self._series[name]
        groups: dict[int | None, list[tuple[int, NodeTotals]]] = {}
        for (ti, series), totals in self.thread_totals.items():
            if series == name:
                groups.setdefault(self.threads[ti].worker, []).append((ti, totals))
        out = {}
        for worker, parts in groups.items():
            mask = np.isin(data.threads, [ti for ti, _ in parts])
            total = NodeTotals(0, 0, 0)
            for _, t in parts:
                total = total + t
            out[worker] = data.subset(mask, total.count, total.total_ns, total.errors)
        return {w: d.stats() for w, d in sorted(out.items(), key=lambda kv: (kv[0] is not None, kv[0] or 0))}

    def gauge_data(self, name: str) -> GaugeData:
        """The retained (time, value) samples behind ``self.gauges[name]``, e.g. to plot memory over time."""
        return self._gauges[name]

    def merge(self, *others: Snapshot) -> Snapshot:
        """Combine snapshots of the same window taken in several processes or ranks.

        Counts, totals, errors and variances add exactly; percentiles come from the union
        of the retained samples.
        """
        parts = (self, *others)
        threads: list[ThreadInfo] = []
        index: dict[ThreadInfo, int] = {}
        maps = []
        for snap in parts:
            numbers = []
            for t in snap.threads:
                if t not in index:
                    index[t] = len(threads)
                    threads.append(t)
                numbers.append(index[t])
            maps.append(np.array(numbers, dtype=np.int64))
        series: dict[str, SeriesData] = {}
        for name in {n for s in parts for n in s._series}:
            owners = [(s._series[name], m) for s, m in zip(parts, maps, strict=True) if name in s._series]
            series[name] = combine([o[0] for o in owners], [o[1] for o in owners])
        tree: dict[Path, NodeTotals] = {}
        per_thread: dict[tuple[int, str], NodeTotals] = {}
        for snap, m in zip(parts, maps, strict=True):
            for path, totals in snap.tree.items():
                tree[path] = tree[path] + totals if path in tree else totals
            for (ti, name), totals in snap.thread_totals.items():
                key = (int(m[ti]), name)
                per_thread[key] = per_thread[key] + totals if key in per_thread else totals
        gauges = {
            name: GaugeData.combine([s._gauges[name] for s in parts if name in s._gauges])
            for name in {n for s in parts for n in s._gauges}
        }
        return Snapshot(
            series,
            tree=tree,
            threads=threads,
            thread_totals=per_thread,
            gauges=gauges,
            start_ns=min(s.start_ns for s in parts),
            end_ns=max(s.end_ns for s in parts),
            dropped_in_transfer=sum(s.dropped_in_transfer for s in parts),
        )

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict; ``Snapshot.from_dict`` reads it back unchanged."""
        return {
            "format": _FORMAT,
            "start_ns": self.start_ns,
            "end_ns": self.end_ns,
            "threads": [asdict(t) for t in self.threads],
            "thread_totals": [
                {"thread": ti, "name": n, **asdict(t)} for (ti, n), t in self.thread_totals.items()
            ],
            "dropped_in_transfer": self.dropped_in_transfer,
            "tree": [{"path": list(p), **asdict(t)} for p, t in self.tree.items()],
            "series": {
                name: {
                    "stats": asdict(self._stats[name]),
                    "count": d.count,
                    "total_ns": d.total_ns,
                    "errors": d.errors,
                    "m2": d.m2,
                    "min_ns": d.min_ns,
                    "max_ns": d.max_ns,
                    "durations_ns": d.durations_ns.tolist(),
                    "starts_ns": d.starts_ns.tolist(),
                    "threads": d.threads.tolist(),
                    "error_samples": np.flatnonzero(d.sample_errors).tolist(),
                }
                for name, d in self._series.items()
            },
            "gauges": {
                name: {
                    "stats": asdict(self.gauges[name]),
                    "count": g.count,
                    "total": g.total,
                    "times_ns": g.times_ns.tolist(),
                    "values": g.values.tolist(),
                }
                for name, g in self._gauges.items()
            },
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Snapshot:
        """Rebuild a snapshot written by ``to_dict``; raises ``ValueError`` on another format."""
        if data.get("format") != _FORMAT:
            raise ValueError(
                f"data: not a perfkit snapshot of format {_FORMAT} (format={data.get('format')!r})"
            )
        series = {}
        for name, s in data["series"].items():
            durations = np.array(s["durations_ns"], dtype=np.int64)
            errors = np.zeros(len(durations), dtype=np.bool_)
            errors[np.array(s["error_samples"], dtype=np.int64)] = True
            series[name] = SeriesData(
                count=s["count"],
                total_ns=s["total_ns"],
                errors=s["errors"],
                m2=s["m2"],
                min_ns=s["min_ns"],
                max_ns=s["max_ns"],
                durations_ns=durations,
                starts_ns=np.array(s["starts_ns"], dtype=np.int64),
                threads=np.array(s["threads"], dtype=np.int64),
                sample_errors=errors,
            )
        return cls(
            series,
            tree={tuple(t["path"]): NodeTotals(t["count"], t["total_ns"], t["errors"]) for t in data["tree"]},
            threads=[ThreadInfo(**t) for t in data["threads"]],
            thread_totals={
                (t["thread"], t["name"]): NodeTotals(t["count"], t["total_ns"], t["errors"])
                for t in data.get("thread_totals", [])
            },
            dropped_in_transfer=data.get("dropped_in_transfer", 0),
            gauges={
                name: GaugeData(
                    g["count"],
                    g["total"],
                    np.array(g["times_ns"], dtype=np.int64),
                    np.array(g["values"], dtype=np.float64),
                )
                for name, g in data.get("gauges", {}).items()
            },
            start_ns=data["start_ns"],
            end_ns=data["end_ns"],
        )

    def to_json(self) -> str:
        return json.dumps(self.to_dict())

    @classmethod
    def from_json(cls, text: str) -> Snapshot:
        return cls.from_dict(json.loads(text))
