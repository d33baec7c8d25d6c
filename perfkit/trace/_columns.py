"""Time ranges as compact columns, and the interval arithmetic the analysis does on them.

A range is three numbers (start µs, duration µs, an integer code) in ``array`` columns, about
20 bytes against ~270 bytes of JSON. Unions, clipping to step windows and walks in start order
are done with numpy on whole columns, never one Python object per range.

    >>> merge(np.array([0.0, 5.0, 20.0]), np.array([10.0, 12.0, 25.0]))
    (array([ 0., 20.]), array([12., 25.]))
    >>> inside(np.array([0.0, 20.0]), np.array([12.0, 25.0]), [(5.0, 22.0)])
    9.0
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator, Sequence

import numpy as np

Window = tuple[float, float]
_CHUNK = 4096  # rows turned into Python numbers at a time


class Ranges:
    """Time ranges as parallel columns (start µs, duration µs, an integer code)."""

    __slots__ = ("code", "dur", "start")

    def __init__(self) -> None:
        self.start = array("d")
        self.dur = array("d")
        self.code = array("q")

    def __len__(self) -> int:
        return len(self.start)

    def add(self, start: float, dur: float, code: int) -> None:
        self.start.append(start)
        self.dur.append(dur)
        self.code.append(code)

    def columns(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return np.frombuffer(self.start), np.frombuffer(self.dur), np.frombuffer(self.code, np.int64)

    def span(self) -> tuple[float, float]:
        start, dur, _ = self.columns()
        return float(start.min()), float((start + dur).max())


def merge(start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The union of the intervals ``[start, end)`` as sorted, disjoint ``(starts, ends)``."""
    if not len(start):
        return start, end
    order = np.argsort(start, kind="stable")
    s, e = start[order], end[order]
    reach = np.maximum.accumulate(e)
    opens = np.ones(len(s), dtype=bool)
    opens[1:] = s[1:] > reach[:-1]  # starts after everything before it ended: a new run
    last = np.append(np.flatnonzero(opens)[1:] - 1, len(s) - 1)
    return s[opens], reach[last]


def inside(start: np.ndarray, end: np.ndarray, windows: Sequence[Window]) -> float:
    """Length of disjoint intervals ``[start, end)`` that falls inside the sorted, disjoint ``windows``."""
    if not len(start) or not windows:
        return 0.0
    before = window_time(windows)
    return float((before(end) - before(start)).sum())


def window_time(windows: Sequence[Window]) -> _WindowTime:
    """A function: instant -> window time elapsed before it (what a clipped interval length needs)."""
    return _WindowTime(windows)


class _WindowTime:
    def __init__(self, windows: Sequence[Window]) -> None:
        self.start = np.array([w[0] for w in windows], dtype=float)
        self.length = np.array([w[1] - w[0] for w in windows], dtype=float)
        self.before = np.concatenate(([0.0], np.cumsum(self.length)))

    def __call__(self, x: np.ndarray) -> np.ndarray:
        if not len(self.start):
            return np.zeros(len(x))
        k = np.searchsorted(self.start, x, side="right") - 1
        at = np.maximum(k, 0)
        into = np.clip(x - self.start[at], 0.0, self.length[at])
        return np.where(k >= 0, self.before[at] + into, 0.0)


def rows(
    order: np.ndarray, a: np.ndarray, b: np.ndarray, code: np.ndarray
) -> Iterator[tuple[float, float, int]]:
    """``(a, b, code)`` as Python numbers in ``order``, gathered a chunk at a time (no sorted copies)."""
    for i in range(0, len(order), _CHUNK):
        chunk = order[i : i + _CHUNK]
        yield from zip(a[chunk].tolist(), b[chunk].tolist(), code[chunk].tolist(), strict=True)


def self_times(ranges: Ranges, exclude: set[int], out: dict[int, list[float]]) -> None:
    """Add each op's ``[count, self µs, total µs]`` to ``out`` (by code): one thread's ranges nested.

    An explicit stack, so 50,000 nested ops need no recursion.
    """
    start, dur, code = ranges.columns()
    order = np.lexsort((-dur, start))  # a parent before the children that share its start
    if exclude:
        order = order[~np.isin(code[order], list(exclude))]
    stack: list[list[float]] = []  # open ops as [end, name id, duration, children's duration]

    def close() -> None:
        _, nid, d, children = stack.pop()
        row = out.setdefault(int(nid), [0, 0.0, 0.0])
        row[0] += 1
        row[1] += max(0.0, d - children)
        row[2] += d

    for t, d, nid in rows(order, start, dur, code):
        while stack and t >= stack[-1][0]:
            close()
        if stack:
            stack[-1][3] += d
        stack.append([t + d, nid, d, 0.0])
    while stack:
        close()


def clipped_by_code(
    tables: Sequence[Ranges], windows: Sequence[Window], only: set[int] | None = None
) -> dict[int, tuple[int, float]]:
    """Code (a name id) -> (ranges that overlap the windows, time inside the windows covered by any of them).

    Ranges of one code are merged first (all tables together): a range nested in another of the same
    name, or the same annotation on two threads at once, does not count its time twice.
    """
    columns = [r.columns() for r in tables if len(r)]
    if not windows or not columns:
        return {}
    start, dur, code = (np.concatenate([c[i] for c in columns]) for i in range(3))
    if only is not None:
        keep = np.isin(code, list(only))
        start, dur, code = start[keep], dur[keep], code[keep]
    before = window_time(windows)
    order = np.lexsort((start, code))
    start, end, code = start[order], (start + dur)[order], code[order]
    counts = before(end) - before(start) > 0
    bounds = np.flatnonzero(np.diff(code)) + 1
    out = {}
    for lo, hi in zip([0, *bounds.tolist()], [*bounds.tolist(), len(code)], strict=True):
        n = int(counts[lo:hi].sum())
        if n:
            out[int(code[lo])] = (n, inside(*merge(start[lo:hi], end[lo:hi]), windows))
    return out
