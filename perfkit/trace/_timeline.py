"""The profiled steps of a trace and the split of their time into parts.

The *main thread* is the one with the most ``ProfilerStep#N`` ranges (without any: the one
whose ranges span longest); its steps are the windows everything else is measured in. Part
marks are read from the main thread, and the autograd engine's threads (a thread other than
the main one that runs backward ops: ``autograd::engine::evaluate_function: ...`` or
``AddmmBackward0``) count as backward wherever they are busy, since ``loss.backward()`` blocks
the main thread until they finish.

    main, windows, labels = step_windows(tables)
    split = part_split(tables, main, windows)
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from ._columns import Ranges, Window, clipped_by_code, merge, rows
from ._parts import AUTOGRAD, BACKWARD, PARTS, SOURCES, TORCH, classify, pack, split_parts, unpack
from ._tables import Thread, TraceTables

AUTOGRAD_THREAD = "autograd engine thread busy"
SOURCE_NAMES_PER_PART = 3  # marks named per (part, source); the rest of their time stays in the part


@dataclass(frozen=True)
class Split:
    """µs per part per window, and µs per mark (``(part, source, name)``)."""

    per_window: np.ndarray
    by_mark: dict[tuple[int, int, str], float]
    other: list[Window]  # the instants of the windows no mark covers


def step_windows(tables: TraceTables) -> tuple[Thread | None, list[Window], list[str]]:
    """The main thread and its windows: its ``ProfilerStep#N`` ranges, else the trace's span."""
    if tables.steps:
        main = max(tables.steps, key=lambda t: len(tables.steps[t]))
        start, dur, code = tables.steps[main].columns()
        windows: list[Window] = []
        labels: list[str] = []
        for i in np.argsort(start, kind="stable").tolist():
            begin = max(float(start[i]), windows[-1][1] if windows else float("-inf"))
            windows.append((begin, max(begin, float(start[i] + dur[i]))))
            labels.append(tables.names[int(code[i])])
        return main, windows, labels
    spans: dict[Thread, list[float]] = {}
    for table in (tables.ops, tables.marks, tables.annotations):
        for thread, ranges in table.items():
            lo, hi = ranges.span()
            old = spans.setdefault(thread, [lo, hi])
            old[:] = [min(old[0], lo), max(old[1], hi)]
    if not spans:
        return None, [], []
    main = max(spans, key=lambda t: spans[t][1] - spans[t][0])
    lo, hi = spans[main]
    if len(tables.device):  # device work launched before (or running after) the CPU's ranges is real
        lo, hi = min(lo, tables.device.span()[0]), max(hi, tables.device.span()[1])
    return main, [(lo, hi)], ["whole trace"]


def autograd_threads(tables: TraceTables, main: Thread | None) -> list[Thread]:
    """Threads other than ``main`` that run backward ops: the autograd engine's."""
    found = []
    for thread, ranges in tables.ops.items():
        if thread == main:
            continue
        ids = np.unique(ranges.columns()[2]).tolist()
        # autograd::engine::... or a ...Backward0 node
        if any(classify(tables.names[i]) == (BACKWARD, TORCH) for i in ids):
            found.append(thread)
    return found


def part_split(tables: TraceTables, main: Thread | None, windows: Sequence[Window]) -> Split:
    """Split the windows into parts: main-thread marks, and autograd threads' busy time."""
    starts, ends, codes = _marks(tables, main)
    if not windows:
        return Split(np.zeros((0, len(PARTS))), {}, [])
    order = np.lexsort((codes // len(PARTS) % len(SOURCES), -ends, starts))
    per_window, by_code = split_parts(rows(order, starts, ends, codes), windows)
    by_mark: dict[tuple[int, int, str], float] = {}
    for code, us in by_code.items():
        part, source, name_id = unpack(code)
        key = (part, source, tables.names[name_id])
        by_mark[key] = by_mark.get(key, 0.0) + us
    return Split(per_window, by_mark, list(_gaps(*merge(starts, ends), windows)))


def _marks(tables: TraceTables, main: Thread | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Start, end and code columns of the part marks: the main thread's and the autograd threads' time."""
    parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    if main is not None and main in tables.marks:
        start, dur, code = tables.marks[main].columns()
        parts.append((start, start + dur, code))
    busy = [r for t in autograd_threads(tables, main) for r in _thread_ranges(tables, t)]
    if busy:
        s, e = merge(np.concatenate([r[0] for r in busy]), np.concatenate([r[1] for r in busy]))
        busy_code = pack(BACKWARD, AUTOGRAD, tables.name_id(AUTOGRAD_THREAD))
        parts.append((s, e, np.full(len(s), busy_code, dtype=np.int64)))
    if not parts:
        return np.zeros(0), np.zeros(0), np.zeros(0, dtype=np.int64)
    return (
        np.concatenate([p[0] for p in parts]),
        np.concatenate([p[1] for p in parts]),
        np.concatenate([p[2] for p in parts]),
    )


def _thread_ranges(tables: TraceTables, thread: Thread) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    for table in (tables.ops, tables.annotations):
        ranges: Ranges | None = table.get(thread)
        if ranges is not None:
            start, dur, _ = ranges.columns()
            yield start, start + dur


def _gaps(starts: np.ndarray, ends: np.ndarray, windows: Sequence[Window]) -> Iterator[Window]:
    """The parts of ``windows`` that the sorted, disjoint intervals leave uncovered."""
    i = 0
    for lo, hi in windows:
        t = lo
        while i < len(starts) and ends[i] <= lo:
            i += 1
        j = i
        while j < len(starts) and starts[j] < hi:
            if starts[j] > t:
                yield t, float(starts[j])
            t = max(t, float(ends[j]))
            j += 1
        if t < hi:
            yield t, hi


def other_annotations(
    tables: TraceTables, main: Thread | None, gaps: Sequence[Window]
) -> list[tuple[str, float]]:
    """Main-thread annotations that mark no part, by the other time inside them, largest first."""
    ranges = tables.annotations.get(main) if main is not None else None
    if ranges is None:
        return []
    found = clipped_by_code([ranges], gaps)
    named = [(tables.names[nid], us) for nid, (_, us) in found.items()]
    return sorted(
        ((n, us) for n, us in named if us > 0 and classify(n, annotation=True) is None), key=lambda r: -r[1]
    )
