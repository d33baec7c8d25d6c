"""Snapshots: an immutable view of a registry's records over one window.

A snapshot is a mapping from series name to ``Stats``. It also keeps what the
statistics were computed from (retained samples, exact totals, the section
tree and the threads the records came from), so that it can be written as
JSON, read back, merged with the snapshots of other processes or ranks, drawn
as a Chrome trace, and printed as a tree.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from functools import partial
from typing import Any, TypeVar

import numpy as np

from ._context import ThreadInfo
from ._formats import SNAPSHOT_FORMAT, check_format
from ._gauges import GaugeData, GaugeStats, gauge_from_dict
from ._stats import SeriesData, Stats, combine, series_from_dict
from ._validate import Fields


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
T = TypeVar("T")


@dataclass(frozen=True)
class Recursion:
    """Calls that re-entered a name already open on their path, at one place: ``count`` of them,
    and ``depth``, the most calls of the name open at once there, the outermost counted (a
    function that called itself once is 2 deep; from the retained records, so at least that).
    Their time is inside the outermost call's, where the tree counts it once."""

    count: int
    depth: int

    def __add__(self, other: Recursion) -> Recursion:
        return Recursion(self.count + other.count, max(self.depth, other.depth))


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

    A recursive function is one node of the tree; ``recursion`` says where it re-entered itself,
    keyed by the path the inner calls were made at, and how deep it went:

    >>> @perfkit.timed("walk", registry=reg)
    ... def walk(n: int) -> int:
    ...     return 0 if n == 0 else walk(n - 1)
    >>> start = reg.cursor(); walk(300); snap = reg.snapshot(since=start)
    0
    >>> snap["walk"].count, snap.recursion[("walk", "walk")]
    (1, Recursion(count=300, depth=301))
    """

    __slots__ = (
        "_gauges",
        "_series",
        "_stats",
        "dropped",
        "dropped_in_transfer",
        "end_ns",
        "gauges",
        "recursion",
        "sketched",
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
        dropped: Mapping[str, int] | None = None,
        sketched: int = 0,
        recursion: Mapping[Path, Recursion] | None = None,
    ) -> None:
        self._series = dict(sorted(series.items(), key=lambda kv: -kv[1].total_ns))
        self._stats = {name: data.stats() for name, data in self._series.items()}
        self.tree: Mapping[Path, NodeTotals] = dict(tree or {})
        self.recursion: Mapping[Path, Recursion] = dict(recursion or {})
        """Re-entries of a name open on their path (recursion), by the path they were made at (the
        fold's anchor, then the name): the tree holds each name once per path."""
        self.threads: tuple[ThreadInfo, ...] = tuple(threads)
        self.thread_totals: Mapping[tuple[int, str], NodeTotals] = dict(thread_totals or {})
        """Exact totals per (index into ``threads``, series name): what ``by_thread`` counts."""
        self.dropped_in_transfer = dropped_in_transfer
        """Records that DataLoader workers dropped in this window because the main process fell behind."""
        self.dropped: Mapping[str, int] = dict(dropped or {})
        """Records the registry dropped in this window, by reason (``invalid records``,
        ``node table full``, ``past max_series: PREFIX``): counted, never silently lost."""
        self.sketched = sketched
        """The number of ranks merged by their sketches (0: exact): the percentiles are then
        within 1% of exact, the samples stand-ins in no order, per-thread splits not merged."""
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
            and self.recursion == other.recursion
            and self.threads == other.threads
            and self.thread_totals == other.thread_totals
            and self.dropped_in_transfer == other.dropped_in_transfer
            and self.dropped == other.dropped
            and self.sketched == other.sketched
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
            total = sum((t for _, t in parts), NodeTotals(0, 0, 0))
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
        index: dict[ThreadInfo, int] = {}  # every thread once, in the order first met
        maps = [np.array([index.setdefault(t, len(index)) for t in s.threads], dtype=np.int64) for s in parts]
        threads = list(index)
        series: dict[str, SeriesData] = {}
        for name in {n for s in parts for n in s._series}:
            owners = [(s._series[name], m) for s, m in zip(parts, maps, strict=True) if name in s._series]
            series[name] = combine([o[0] for o in owners], [o[1] for o in owners])
        tree: dict[Path, NodeTotals] = {}
        recursion: dict[Path, Recursion] = {}
        per_thread: dict[tuple[int, str], NodeTotals] = {}
        for snap, m in zip(parts, maps, strict=True):
            for path, totals in snap.tree.items():
                tree[path] = tree[path] + totals if path in tree else totals
            for path, fold in snap.recursion.items():
                recursion[path] = recursion[path] + fold if path in recursion else fold
            for (ti, name), totals in snap.thread_totals.items():
                key = (int(m[ti]), name)
                per_thread[key] = per_thread[key] + totals if key in per_thread else totals
        gauges = {
            name: GaugeData.combine([s._gauges[name] for s in parts if name in s._gauges])
            for name in {n for s in parts for n in s._gauges}
        }
        dropped: dict[str, int] = {}
        for snap in parts:
            for reason, n in snap.dropped.items():
                dropped[reason] = dropped.get(reason, 0) + n
        return Snapshot(
            series,
            tree=tree,
            threads=threads,
            thread_totals=per_thread,
            gauges=gauges,
            start_ns=min(s.start_ns for s in parts),
            end_ns=max(s.end_ns for s in parts),
            dropped_in_transfer=sum(s.dropped_in_transfer for s in parts),
            dropped=dropped,
            sketched=max(s.sketched for s in parts),
            recursion=recursion,
        )

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict; ``Snapshot.from_dict`` reads it back unchanged."""
        return {
            "format": SNAPSHOT_FORMAT,
            "start_ns": self.start_ns,
            "end_ns": self.end_ns,
            "threads": [asdict(t) for t in self.threads],
            "thread_totals": [
                {"thread": ti, "name": n, **asdict(t)} for (ti, n), t in self.thread_totals.items()
            ],
            "dropped_in_transfer": self.dropped_in_transfer,
            "dropped": dict(self.dropped),
            **({"sketched": self.sketched} if self.sketched else {}),
            "tree": [{"path": list(p), **asdict(t)} for p, t in self.tree.items()],
            **(
                {"recursion": [{"path": list(p), **asdict(r)} for p, r in self.recursion.items()]}
                if self.recursion
                else {}
            ),
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
        """Rebuild a snapshot written by ``to_dict``.

        Raises ``FormatError`` for another format (``SNAPSHOT_FORMAT``), and ``ValueError``, naming the
        field and the value, for anything else: a field of the wrong type, a negative count, columns
        of unequal length.

        >>> Snapshot.from_dict({"format": 1, "series": {}})
        Traceback (most recent call last):
        ...
        ValueError: snapshot: start_ns is missing
        """
        f = Fields("snapshot")
        doc = f.mapping(data, "the document")
        check_format("the snapshot", doc, SNAPSHOT_FORMAT)
        threads = _rows(f, doc, "threads", _thread)
        return cls(
            {
                name: series_from_dict(f, s, f"series[{name!r}]", len(threads))
                for name, s in _named(f, doc, "series")
            },
            tree=dict(_rows(f, doc, "tree", _tree_row)),
            threads=threads,
            thread_totals=dict(
                _rows(f, doc, "thread_totals", partial(_thread_total, n_threads=len(threads)))
            ),
            dropped_in_transfer=f.integer(doc, "dropped_in_transfer", "")
            if "dropped_in_transfer" in doc
            else 0,
            dropped={
                k: f.integer(v, "n", f"dropped[{k!r}]") for k, v in _named(f, doc, "dropped", wrap=True)
            },
            gauges={name: gauge_from_dict(f, g, f"gauges[{name!r}]") for name, g in _named(f, doc, "gauges")},
            start_ns=f.integer(doc, "start_ns", "", low=None),
            end_ns=f.integer(doc, "end_ns", "", low=None),
            sketched=f.integer(doc, "sketched", "") if "sketched" in doc else 0,
            recursion=dict(_rows(f, doc, "recursion", _recursion_row)),
        )

    def to_json(self) -> str:
        return json.dumps(self.to_dict())

    @classmethod
    def from_json(cls, text: str | bytes) -> Snapshot:
        """Read ``to_json``'s output; raises ``ValueError`` for anything else (see ``from_dict``)."""
        if not isinstance(text, (str, bytes)):
            raise TypeError(f"text must be a str, got {text!r} of type {type(text).__name__}")
        try:
            data = json.loads(text)
        except (ValueError, RecursionError) as exc:  # JSONDecodeError, bad UTF-8, nesting too deep
            raise ValueError(f"snapshot: not JSON ({str(exc)[:200] or type(exc).__name__})") from None
        return cls.from_dict(data)


def _rows(f: Fields, doc: dict[str, Any], key: str, read: Callable[[Fields, object, str], T]) -> list[T]:
    """Each item of the list ``doc[key]`` (absent: none), read by ``read`` at its place."""
    return [read(f, t, f"{key}[{i}]") for i, t in enumerate(f.items(f.get(doc, key, "", []), key))]


def _named(f: Fields, doc: dict[str, Any], key: str, *, wrap: bool = False) -> list[tuple[str, Any]]:
    """The (name, value) pairs of the object ``doc[key]`` (absent: none)."""
    items = f.mapping(f.get(doc, key, "", {}), key)
    return [(name, {"n": value} if wrap else value) for name, value in items.items()]


def _thread(f: Fields, raw: object, where: str) -> ThreadInfo:
    t = f.mapping(raw, where)
    worker = t.get("worker")
    return ThreadInfo(
        pid=f.integer(t, "pid", where),
        tid=f.integer(t, "tid", where, low=None),
        name=f.text(t, "name", where),
        worker=None if worker is None else f.integer(t, "worker", where),
    )


def _totals(f: Fields, t: dict[str, Any], where: str) -> NodeTotals:
    count = f.integer(t, "count", where)
    errors = f.integer(t, "errors", where)
    if errors > count:
        raise f.fail(f"{where}.errors", f"must be <= count ({count}), got {errors}")
    return NodeTotals(count, f.integer(t, "total_ns", where), errors)


def _path(f: Fields, t: dict[str, Any], where: str) -> Path:
    path = f.items(f.get(t, "path", where), f"{where}.path")
    if not path or not all(isinstance(p, str) for p in path):
        raise f.fail(f"{where}.path", f"must be a non-empty list of names, got {path!r}"[:120])
    return tuple(path)


def _tree_row(f: Fields, raw: object, where: str) -> tuple[Path, NodeTotals]:
    t = f.mapping(raw, where)
    return _path(f, t, where), _totals(f, t, where)


def _recursion_row(f: Fields, raw: object, where: str) -> tuple[Path, Recursion]:
    t = f.mapping(raw, where)
    return _path(f, t, where), Recursion(f.integer(t, "count", where), f.integer(t, "depth", where, low=1))


def _thread_total(f: Fields, raw: object, where: str, n_threads: int) -> tuple[tuple[int, str], NodeTotals]:
    t = f.mapping(raw, where)
    ti = f.integer(t, "thread", where)
    if ti >= n_threads:
        raise f.fail(f"{where}.thread", f"must index threads (0..{n_threads - 1}), got {ti}")
    return (ti, f.text(t, "name", where)), _totals(f, t, where)
