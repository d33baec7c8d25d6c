"""A torch profiler trace reduced, in one streaming pass, to compact columns.

No event dict outlives its line of the loop: ranges become three numbers in ``array`` columns
(see ``_columns``), names are interned once, per-name totals are summed on the fly. Ranges stay
per thread (CPU) or per stream (device) because nesting, parts and idle gaps only make sense
there. ``ProfilerStep#N`` and other annotations do not nest cleanly with ops (Lightning steps the
profiler inside ``Optimizer.step``), so they are kept apart from the op tree.

Events that cannot be read (``ts`` missing or ``true``, ``dur`` NaN, a 400-digit number) are
skipped and counted by reason in ``skipped``: the analysis says what it left out. (A ``ts`` or
``dur`` string is a number or an error by the time it gets here: see ``_events``.)

    tables = read_tables("step.pt.trace.json.gz")
    tables.op_times(exclude=set())      # name id -> [count, self µs, total µs]
"""

from __future__ import annotations

import math
import os
import re
from array import array
from typing import Any, TypeGuard

from ..names import MARK_PREFIX
from ._columns import Ranges, self_times
from ._events import iter_trace_values
from ._parts import classify, pack

Thread = tuple[str, str]  # (pid, tid) as text
OP_CATEGORIES = frozenset({"cpu_op", "operator"})  # older torch wrote "Operator"
KERNEL, MEMCPY, MEMSET = range(3)
KINDS = ("kernel", "memcpy", "memset")
# Device activity by category (lower case); older torch wrote "Kernel"/"Memcpy"/"Memset". MTIA's
# "dma_request" events are copies; CUPTI's range profiler writes each kernel as a profiler range.
DEVICE_CATEGORIES = {"kernel": KERNEL, "gpu_memcpy": MEMCPY, "memcpy": MEMCPY, "gpu_memset": MEMSET}
DEVICE_CATEGORIES |= {"memset": MEMSET, "mtia_ccp_events": KERNEL, "cuda_profiler_range": KERNEL}
# CPU-side launches (cudaLaunchKernel, hipMemcpyAsync, ...), joined to device work by "correlation".
LAUNCH_CATEGORIES = frozenset(
    {"cuda_runtime", "runtime", "cuda_driver", "mtia_runtime", "privateuse1_runtime"}
)
COMM_KERNEL = re.compile(r"(?i)(?:^|[^a-z])[rh]?nccl|(?:^|[^a-z])hccl")
MAX_US = 2.0**62  # no real time stamp or duration comes near
MAX_BYTES = 2.0**62
_DEVICE_TYPES = {0: "cpu", 1: "cuda", 6: "hip", 12: "xpu", 13: "mps", 19: "mtia"}


class TraceTables:
    """What the analysis needs from a trace; filled by :func:`read_tables`."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self.name_ids: dict[str, int] = {}
        self.metadata: dict[str, Any] = {}
        self.event_count = 0
        self.skipped: dict[str, int] = {}  # reason -> events left out
        self.ops: dict[Thread, Ranges] = {}  # cpu ops, code = name id
        self.marks: dict[Thread, Ranges] = {}  # part marks, code = _parts.pack(...)
        self.annotations: dict[Thread, Ranges] = {}  # user annotations, code = name id
        self.steps: dict[Thread, Ranges] = {}  # ProfilerStep#N, code = name id
        self.gpu_annotations = Ranges()  # gpu_user_annotation, code = name id
        self.gpu: dict[tuple[int, str], list[float]] = {}  # (kind, name) -> [count, µs, bytes, µs with bytes]
        self.device = Ranges()  # device activity, code = (stream * 2 + comm) * 4 + kind
        self.correlation = array("q")  # of each device activity, -1 unknown
        self.streams: list[Thread] = []
        self.launches = (array("q"), array("d"))  # (correlation, ts) of CPU-side launches
        self.memory: dict[str, tuple[array[float], ...]] = {}  # device -> ts, Bytes, allocated, reserved
        self._codes: dict[tuple[str, bool], int | None] = {}
        self._device_names: dict[str, bool] = {}
        self._stream_ids: dict[Thread, int] = {}

    def name_id(self, name: str) -> int:
        nid = self.name_ids.get(name)
        if nid is None:
            nid = self.name_ids[name] = len(self.names)
            self.names.append(name)
        return nid

    def skip(self, reason: str) -> None:
        self.skipped[reason] = self.skipped.get(reason, 0) + 1

    def add(self, event: object) -> None:
        self.event_count += 1
        if not isinstance(event, dict):
            self.skip("not a JSON object")
            return
        ph = event.get("ph")
        if ph == "X":
            self._add_range(event)
        elif ph in ("i", "I") and event.get("name") == "[memory]":
            self._add_memory(event)

    def _add_range(self, event: dict[str, Any]) -> None:
        ts = _time(event, "ts", self)
        dur = None if ts is None else _time(event, "dur", self, 0.0)  # an event is counted once
        if ts is None or dur is None:
            return
        if dur < 0:
            self.skip("dur negative")
            return
        cat, name = event.get("cat"), event.get("name")
        if not isinstance(cat, str) or not isinstance(name, str):
            self.skip("cat or name not a string")
            return
        cat = cat.lower()
        if cat in OP_CATEGORIES or cat == "user_annotation":
            self._add_cpu(cat, name, ts, dur, (str(event.get("pid")), str(event.get("tid"))))
        elif cat in DEVICE_CATEGORIES:
            self._add_device(event, DEVICE_CATEGORIES[cat], name, ts, dur)
        elif cat in LAUNCH_CATEGORIES:
            corr = _args(event).get("correlation")
            if _is_count(corr):
                self.launches[0].append(corr)
                self.launches[1].append(ts)
        elif cat == "gpu_user_annotation":
            self.gpu_annotations.add(ts, dur, self.name_id(name))

    def _add_cpu(self, cat: str, name: str, ts: float, dur: float, thread: Thread) -> None:
        annotation = cat == "user_annotation"
        if name.startswith("ProfilerStep#"):
            _ranges(self.steps, thread).add(ts, dur, self.name_id(name))
            return
        mark = self._mark(name, annotation)
        if mark is not None:
            _ranges(self.marks, thread).add(ts, dur, mark)
        if name.startswith(MARK_PREFIX):  # perfkit's marks are parts, not work
            return
        _ranges(self.annotations if annotation else self.ops, thread).add(ts, dur, self.name_id(name))

    def _mark(self, name: str, annotation: bool) -> int | None:
        key = (name, annotation)
        if key not in self._codes:
            found = classify(name, annotation=annotation)
            self._codes[key] = None if found is None else pack(*found, self.name_id(name))
        return self._codes[key]

    def _add_device(self, event: dict[str, Any], kind: int, name: str, ts: float, dur: float) -> None:
        args = _args(event)
        if name == "dma_request":
            kind = MEMCPY
        size = args.get("bytes", args.get("size"))
        row = self.gpu.setdefault((kind, name), [0, 0.0, 0.0, 0.0])
        row[0] += 1
        row[1] += dur
        if _is_count(size):
            row[2] += size
            row[3] += dur
        stream = self._stream((str(event.get("pid")), str(event.get("tid"))))
        comm = self._device_names.get(name)
        if comm is None:
            comm = self._device_names[name] = kind == KERNEL and COMM_KERNEL.search(name) is not None
        self.device.add(ts, dur, (stream * 2 + comm) * 4 + kind)
        corr = args.get("correlation")
        self.correlation.append(corr if _is_count(corr) else -1)

    def _stream(self, key: Thread) -> int:
        sid = self._stream_ids.get(key)
        if sid is None:
            sid = self._stream_ids[key] = len(self.streams)
            self.streams.append(key)
        return sid

    def _add_memory(self, event: dict[str, Any]) -> None:
        ts, args = _time(event, "ts", self), _args(event)
        if ts is None:
            return
        values = [_bytes(args.get(k)) for k in ("Bytes", "Total Allocated", "Total Reserved")]
        if values[0] is None and values[1] is None:
            self.skip("[memory] without a usable Bytes or Total Allocated")
            return
        device = _device(args.get("Device Type"), args.get("Device Id"))
        columns = self.memory.get(device)
        if columns is None:
            columns = self.memory[device] = (array("d"), array("d"), array("d"), array("d"))
        for column, value in zip(columns, (ts, *values), strict=True):
            column.append(math.nan if value is None else value)

    def op_times(self, exclude: set[int]) -> dict[int, list[float]]:
        """Name id -> ``[count, self µs, total µs]`` over every thread; ``exclude``: not ops."""
        out: dict[int, list[float]] = {}
        for ranges in self.ops.values():
            self_times(ranges, exclude, out)
        return out


def read_tables(path: str | os.PathLike[str]) -> TraceTables:
    """Stream the trace at ``path`` into a :class:`TraceTables`."""
    tables = TraceTables()
    for event in iter_trace_values(path, tables.metadata):
        tables.add(event)
    return tables


def _time(event: dict[str, Any], key: str, tables: TraceTables, default: float | None = None) -> float | None:
    """``event[key]`` in µs as a float, or None after counting why it is not one.

    Past ``MAX_US`` (146,000 years) a time is corrupt; the bound keeps every sum of times finite.
    """
    value = event.get(key, default)
    if (type(value) is float or type(value) is int) and -MAX_US < value < MAX_US:  # nearly every event
        return float(value)
    if value is None or isinstance(value, bool) or not isinstance(value, (int, float)):
        tables.skip(f"{key} not a number")
        return None
    number = _finite(value)
    if number is None or abs(number) >= MAX_US:
        tables.skip(
            f"{key} not finite" if number is None and not isinstance(value, int) else f"{key} out of range"
        )
        return None
    return number


def _finite(value: object) -> float | None:
    """A JSON number as a finite float; None for anything else (NaN, inf, 400 digits, text)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def _bytes(value: object) -> float | None:
    """A byte count or delta; None when absent or past any real size (so sums stay finite)."""
    number = _finite(value)
    return number if number is not None and abs(number) < MAX_BYTES else None


def _is_count(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**62


def _args(event: dict[str, Any]) -> dict[str, Any]:
    args = event.get("args")
    return args if isinstance(args, dict) else {}


def _ranges(table: dict[Thread, Ranges], thread: Thread) -> Ranges:
    ranges = table.get(thread)
    if ranges is None:
        ranges = table[thread] = Ranges()
    return ranges


def _device(device_type: object, device_id: object) -> str:
    if not isinstance(device_type, int) or isinstance(device_type, bool):
        return "unknown device"
    kind = _DEVICE_TYPES.get(device_type, f"device_type_{device_type}")
    if kind == "cpu" or not isinstance(device_id, int) or device_id < 0:
        return kind
    return f"{kind}:{device_id}"
