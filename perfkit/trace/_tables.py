"""A torch profiler trace reduced, in one streaming pass, to compact columns per thread.

No event dict outlives its line of the loop: ranges become three numbers in ``array`` columns
(about 20 bytes each, against ~270 bytes of JSON), names are interned once, kernels and
memory samples are aggregated on the fly. Self time of CPU ops is computed here, thread by
thread, from the op ranges alone: ``ProfilerStep#N`` and other annotations do not nest
cleanly with ops (Lightning steps the profiler inside ``Optimizer.step``), so they stay out
of the op tree.

    tables = read_tables("step.pt.trace.json.gz")
    times = tables.op_times(exclude=set())      # name id -> [count, self µs, total µs]
"""

from __future__ import annotations

import os
from array import array
from collections.abc import Iterator
from typing import Any, TypeGuard

import numpy as np

from ..names import MARK_PREFIX
from ._events import iter_trace_events
from ._phases import PHASES, classify

Thread = tuple[str, str]
OP_CATEGORIES = frozenset({"cpu_op", "operator"})
# Older torch versions wrote "Memcpy"/"Memset"/"Kernel".
GPU_CATEGORIES = {"kernel": "kernel", "gpu_memcpy": "memcpy", "memcpy": "memcpy"}
GPU_CATEGORIES |= {"gpu_memset": "memset", "memset": "memset"}
_DEVICE_TYPES = {0: "cpu", 1: "cuda", 6: "hip", 12: "xpu", 13: "mps", 19: "mtia"}
_CHUNK = 4096  # rows turned into Python numbers at a time


class Ranges:
    """Time ranges as parallel columns (start µs, duration µs, an integer code)."""

    __slots__ = ("code", "dur", "start")

    def __init__(self) -> None:
        self.start = array("d")
        self.dur = array("d")
        self.code = array("q")

    def add(self, start: float, dur: float, code: int) -> None:
        self.start.append(start)
        self.dur.append(dur)
        self.code.append(code)

    def columns(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return np.frombuffer(self.start), np.frombuffer(self.dur), np.frombuffer(self.code, np.int64)

    def span(self) -> tuple[float, float]:
        start, dur, _ = self.columns()
        return float(start.min()), float((start + dur).max())


class TraceTables:
    """What the analysis needs from a trace; filled by :func:`read_tables`."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self.name_ids: dict[str, int] = {}
        self.metadata: dict[str, Any] = {}
        self.event_count = 0
        self.ops: dict[Thread, Ranges] = {}  # cpu ops, code = name id
        self.marks: dict[Thread, Ranges] = {}  # phase marks, code = phase + len(PHASES) * source
        self.annotations: dict[Thread, Ranges] = {}  # other user annotations, code = name id
        self.steps: dict[Thread, Ranges] = {}  # ProfilerStep#N, code = N
        self.gpu: dict[tuple[str, str], list[float]] = {}  # (kind, name) -> [count, total µs]
        self.kernels = Ranges()  # code unused
        self.memory: dict[str, list[int]] = {}  # device -> [peak allocated, peak reserved]
        self._marks: dict[str, tuple[int, int] | None] = {}

    def name_id(self, name: str) -> int:
        nid = self.name_ids.get(name)
        if nid is None:
            nid = self.name_ids[name] = len(self.names)
            self.names.append(name)
        return nid

    def add(self, event: dict[str, Any]) -> None:
        self.event_count += 1
        ph = event.get("ph")
        if ph == "X":
            self._add_range(event)
        elif ph in ("i", "I") and event.get("name") == "[memory]":
            self._add_memory(event.get("args"))

    def _add_range(self, event: dict[str, Any]) -> None:
        cat, name, ts, dur = event.get("cat"), event.get("name"), event.get("ts"), event.get("dur", 0.0)
        if not (isinstance(cat, str) and isinstance(name, str) and _is_number(ts) and _is_number(dur)):
            return
        cat = cat.lower()
        thread = (str(event.get("pid")), str(event.get("tid")))
        if cat in OP_CATEGORIES or cat == "user_annotation":
            if name.startswith("ProfilerStep#"):
                step = name[len("ProfilerStep#") :]
                _ranges(self.steps, thread).add(ts, dur, int(step) if step.isdigit() else -1)
                return
            mark = self._mark(name)
            if mark is not None:
                _ranges(self.marks, thread).add(ts, dur, mark[0] + len(PHASES) * mark[1])
            # perfkit's marks are phases, not work: keep them out of the op tree.
            if cat in OP_CATEGORIES and not name.startswith(MARK_PREFIX):
                _ranges(self.ops, thread).add(ts, dur, self.name_id(name))
            elif cat == "user_annotation" and mark is None:
                _ranges(self.annotations, thread).add(ts, dur, self.name_id(name))
        elif cat in GPU_CATEGORIES:
            row = self.gpu.setdefault((GPU_CATEGORIES[cat], name), [0, 0.0])
            row[0] += 1
            row[1] += dur
            if cat == "kernel":
                self.kernels.add(ts, dur, 0)

    def _mark(self, name: str) -> tuple[int, int] | None:
        if name not in self._marks:
            self._marks[name] = classify(name)
        return self._marks[name]

    def _add_memory(self, args: object) -> None:
        if not isinstance(args, dict):
            return
        device = _device(args.get("Device Type"), args.get("Device Id"))
        peak = self.memory.setdefault(device, [0, 0])
        for i, key in enumerate(("Total Allocated", "Total Reserved")):
            value = args.get(key)
            if _is_number(value) and value > peak[i]:
                peak[i] = int(value)

    def op_times(self, exclude: set[int]) -> dict[int, list[float]]:
        """Name id -> ``[count, self µs, total µs]`` over every thread; ``exclude``: not ops."""
        out: dict[int, list[float]] = {}
        for ranges in self.ops.values():
            _self_times(ranges, exclude, out)
        return out


def read_tables(path: str | os.PathLike[str]) -> TraceTables:
    """Stream the trace at ``path`` into a :class:`TraceTables`."""
    tables = TraceTables()
    for event in iter_trace_events(path, tables.metadata):
        tables.add(event)
    return tables


def _self_times(ranges: Ranges, exclude: set[int], out: dict[int, list[float]]) -> None:
    start, dur, code = ranges.columns()
    order = np.lexsort((-dur, start))  # a parent before the children that share its start
    if exclude:
        order = order[~np.isin(code[order], list(exclude))]
    # Open ops as [end, name id, duration, children's duration]; depth-bounded.
    stack: list[list[float]] = []

    def close() -> None:
        _, nid, d, children = stack.pop()
        row = out.setdefault(int(nid), [0, 0.0, 0.0])
        row[0] += 1
        row[1] += max(0.0, d - children)
        row[2] += d

    for t, d, nid in _rows(order, start, dur, code):
        while stack and t >= stack[-1][0]:
            close()
        if stack:
            stack[-1][3] += d
        stack.append([t + d, nid, d, 0.0])
    while stack:
        close()


def _rows(
    order: np.ndarray, a: np.ndarray, b: np.ndarray, code: np.ndarray
) -> Iterator[tuple[float, float, int]]:
    # Python numbers for the loop, gathered a chunk at a time: no sorted copy of whole columns.
    for i in range(0, len(order), _CHUNK):
        rows = order[i : i + _CHUNK]
        yield from zip(a[rows].tolist(), b[rows].tolist(), code[rows].tolist(), strict=True)


def mark_rows(ranges: Ranges) -> Iterator[tuple[float, float, int]]:
    """Phase marks as ``(start, end, code)``: by start, outer first, then by source (see split_phases)."""
    start, dur, code = ranges.columns()
    end = start + dur
    return _rows(np.lexsort((code // len(PHASES), -end, start)), start, end, code)


def _ranges(table: dict[Thread, Ranges], thread: Thread) -> Ranges:
    ranges = table.get(thread)
    if ranges is None:
        ranges = table[thread] = Ranges()
    return ranges


def _device(device_type: object, device_id: object) -> str:
    if not isinstance(device_type, int):
        return "unknown device"
    kind = _DEVICE_TYPES.get(device_type, f"device_type_{device_type}")
    if kind == "cpu" or not isinstance(device_id, int) or device_id < 0:
        return kind
    return f"{kind}:{device_id}"


def _is_number(value: object) -> TypeGuard[int | float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool)
