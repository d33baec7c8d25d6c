"""Hand-built torch profiler traces for the tests: every expected number is known by construction.

Times are µs from 0. ``write_trace`` writes the events in torch's C++ layout (each event over
several lines, metadata keys before ``traceEvents`` and ``traceName`` after), the Python
writer's one-event-per-line layout, or a single line, gzipped when asked.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

Event = dict[str, Any]
PID, TID = 100, 100


def op(name: str, ts: float, dur: float, *, tid: int = TID, cat: str = "cpu_op") -> Event:
    return {"ph": "X", "cat": cat, "name": name, "pid": PID, "tid": tid, "ts": ts, "dur": dur, "args": {}}


def mark(name: str, ts: float, dur: float, *, tid: int = TID) -> Event:
    return op(name, ts, dur, tid=tid, cat="user_annotation")


def step(n: int, ts: float, dur: float, *, tid: int = TID) -> Event:
    return mark(f"ProfilerStep#{n}", ts, dur, tid=tid)


def kernel(name: str, ts: float, dur: float, *, stream: int = 7, cat: str = "kernel") -> Event:
    return {"ph": "X", "cat": cat, "name": name, "pid": 0, "tid": stream, "ts": ts, "dur": dur, "args": {}}


def memory(
    ts: float, allocated: int, reserved: int = 0, *, device_type: int = 0, device_id: int = -1
) -> Event:
    args = {"Total Allocated": allocated, "Total Reserved": reserved, "Bytes": 8}
    args |= {"Device Type": device_type, "Device Id": device_id}
    event = {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": PID, "tid": TID}
    return event | {"ts": ts, "args": args}


def write_trace(
    path: Path,
    events: Iterable[Event],
    *,
    layout: str = "torch",
    sections: list[str] | None = None,
    **top_level: Any,
) -> Path:
    """Write ``events`` to ``path`` (gzip when it ends in ``.gz``); ``sections`` -> the "perfkit" key."""
    head: dict[str, Any] = {"schemaVersion": 1, "deviceProperties": []}
    if sections is not None:
        head["perfkit"] = {"sections": sections}
    head |= top_level
    text = _render(head, list(events), layout)
    if path.name.endswith(".gz"):
        path.write_bytes(gzip.compress(text.encode()))
    else:
        path.write_text(text)
    return path


def _render(head: dict[str, Any], events: list[Event], layout: str) -> str:
    tail = f'"traceName": {json.dumps("trace.json")}'
    if layout == "line":
        return json.dumps({**head, "traceEvents": events, "traceName": "trace.json"})
    keys = "".join(f"{json.dumps(k)}: {json.dumps(v)},\n" for k, v in head.items())
    if layout == "lines":  # torch's Python writer
        body = ",\n".join(json.dumps(e, separators=(",", ":")) for e in events)
        return "{\n" + keys + '"traceEvents": [\n' + body + "\n],\n" + tail + "\n}\n"
    assert layout == "torch", layout
    body = ",\n".join("  " + json.dumps(e, indent=4).replace("\n", "\n  ") for e in events)
    return "{\n  " + keys.replace("\n", "\n  ") + '"traceEvents": [\n  \n' + body + "\n  ]," + tail + " }"
