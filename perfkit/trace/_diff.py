"""``diff_traces``: two traces compared per step, CPU ops and device kernels alike.

Each name's time per step (ops: self time; kernels, copies, fills: device time) is compared;
names present on one side only are listed as appeared or vanished. Changes smaller than the
noise floor (``NOISE_FLOOR_SHARE`` of the longer step, at least ``NOISE_FLOOR_MIN_US``) are
left out and counted, so the lists show what moved, and the diff says how much it hid.

    d = diff_traces("before.json.gz", "after.json.gz")
    d.grown_kernels[0]          # TimeChange(name=..., before_us=23.5e3, after_us=57.2e3, ...)
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from .._validate import check_int
from ._analysis import analyze_trace
from ._parts import ALL_PARTS
from ._results import TraceAnalysis

NOISE_FLOOR_SHARE = 0.005  # of the longer step time
NOISE_FLOOR_MIN_US = 1.0


@dataclass(frozen=True)
class TracePartChange:
    """One part of the step in two traces: µs per step and share of step time, before and after.

    (``perfkit.findings.PartChange`` is a part of a stage's account in two runs.)
    """

    part: str
    before_us: float
    after_us: float
    before_share: float
    after_share: float
    change_us: float = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "change_us", self.after_us - self.before_us)


@dataclass(frozen=True)
class TimeChange:
    """An op, kernel or section in two traces: µs per step before and after (0 where absent)."""

    name: str
    before_us: float
    after_us: float
    change_us: float = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "change_us", self.after_us - self.before_us)


@dataclass(frozen=True)
class Changes:
    """The changes of one kind of name (ops or kernels), each list largest change first."""

    grown: tuple[TimeChange, ...]
    shrunk: tuple[TimeChange, ...]
    appeared: tuple[TimeChange, ...]
    vanished: tuple[TimeChange, ...]
    hidden_count: int  # changes below the noise floor, left out of the lists
    hidden_us: float  # their net change per step


@dataclass(frozen=True)
class TraceDiff:
    """Two traces compared per step (a trace without steps counts as one step).

    ``parts`` lists every part; a text report shows only those one side has. ``ops`` compares
    CPU op self time, ``kernels`` device activity time.
    """

    before: str
    after: str
    before_steps: int
    after_steps: int
    before_step_us: float
    after_step_us: float
    parts: tuple[TracePartChange, ...]
    grown_sections: tuple[TimeChange, ...]
    ops: Changes
    kernels: Changes
    noise_floor_us: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def diff_traces(
    path_a: str | os.PathLike[str], path_b: str | os.PathLike[str], *, top_k: int = 10
) -> TraceDiff:
    """Compare two traces per step: parts, ops and kernels that grew, shrank, appeared or vanished.

    ``perfkit diff before.json.gz after.json.gz`` prints the same comparison.

    >>> import json, os, tempfile
    >>> def write(name, dur):
    ...     op = {"ph": "X", "cat": "cpu_op", "pid": 1, "tid": 1, "name": "aten::mm", "ts": 0, "dur": dur}
    ...     path = os.path.join(tempfile.mkdtemp(), name)
    ...     _ = open(path, "w").write(json.dumps({"traceEvents": [op]}))
    ...     return path
    >>> diff_traces(write("a.json", 10), write("b.json", 30)).ops.grown
    (TimeChange(name='aten::mm', before_us=10.0, after_us=30.0, change_us=20.0),)
    """
    check_int(top_k, "top_k", low=1)
    a, b = analyze_trace(path_a, top_k=sys.maxsize), analyze_trace(path_b, top_k=sys.maxsize)
    steps_a, steps_b = max(a.step_count, 1), max(b.step_count, 1)
    floor = max(NOISE_FLOOR_MIN_US, NOISE_FLOOR_SHARE * max(a.span_us / steps_a, b.span_us / steps_b))
    ops = _changes(
        {o.name: o.self_us / steps_a for o in a.top_cpu_ops},
        {o.name: o.self_us / steps_b for o in b.top_cpu_ops},
        floor,
        top_k,
    )
    kernels = _changes(_device_times(a, steps_a), _device_times(b, steps_b), floor, top_k)
    sec_a = {s.name: s.total_us / steps_a for s in a.sections}
    sec_b = {s.name: s.total_us / steps_b for s in b.sections}
    sections = [TimeChange(n, sec_a.get(n, 0.0), us) for n, us in sec_b.items() if us > sec_a.get(n, 0.0)]
    return TraceDiff(
        before=a.path,
        after=b.path,
        before_steps=a.step_count,
        after_steps=b.step_count,
        before_step_us=a.span_us / steps_a,
        after_step_us=b.span_us / steps_b,
        parts=_parts(a, b, steps_a, steps_b),
        grown_sections=tuple(sorted(sections, key=lambda c: -c.change_us)),
        ops=ops,
        kernels=kernels,
        noise_floor_us=floor,
    )


def _parts(a: TraceAnalysis, b: TraceAnalysis, steps_a: int, steps_b: int) -> tuple[TracePartChange, ...]:
    return tuple(
        TracePartChange(
            p, a.parts.us(p) / steps_a, b.parts.us(p) / steps_b, a.parts.share(p), b.parts.share(p)
        )
        for p in ALL_PARTS
    )


def _device_times(a: TraceAnalysis, steps: int) -> dict[str, float]:
    out: dict[str, float] = {}
    for k in a.top_cuda_kernels:
        out[k.name] = out.get(k.name, 0.0) + k.total_us / steps
    return out


def _changes(before: Mapping[str, float], after: Mapping[str, float], floor: float, top_k: int) -> Changes:
    lists: dict[str, list[TimeChange]] = {"grown": [], "shrunk": [], "appeared": [], "vanished": []}
    hidden_count, hidden_us = 0, 0.0
    for name in {**before, **after}:
        change = TimeChange(name, before.get(name, 0.0), after.get(name, 0.0))
        if abs(change.change_us) < floor:
            hidden_count += change.change_us != 0 or name not in before or name not in after
            hidden_us += change.change_us
            continue
        key = "appeared" if name not in before else "vanished" if name not in after else None
        lists[key or ("grown" if change.change_us > 0 else "shrunk")].append(change)
    ordered = {
        k: tuple(sorted(v, key=lambda c: (-abs(c.change_us), c.name))[:top_k]) for k, v in lists.items()
    }
    return Changes(**ordered, hidden_count=int(hidden_count), hidden_us=hidden_us)
