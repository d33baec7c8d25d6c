"""``analyze_trace`` / ``diff_traces``: where the steps of a torch profiler trace spent their time.

The trace is streamed (``.json`` or ``.json.gz``, no torch needed) into compact tables, then
summarised: top CPU ops by self time, top GPU kernels, memory peaks, the split of step time
into data loading / forward / backward / optimizer / unaccounted, perfkit's sections, and
plain-words findings when a share crosses one of the thresholds below.

    a = perfkit.trace.analyze_trace("profiler_traces/train_epoch1.pt.trace.json.gz")
    a.phases.share("data_loading")              # 0.62
    print(perfkit.trace.format_analysis(a))
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from ..findings import find_bottlenecks
from ..names import TRACE_METADATA_KEY
from ._phases import ALL_PHASES, split_phases
from ._results import (
    KernelStat,
    MemoryPeak,
    OpStat,
    PhaseChange,
    PhaseSplit,
    SectionStat,
    TimeChange,
    TraceAnalysis,
    TraceDiff,
)
from ._tables import Thread, TraceTables, mark_rows, read_tables

Window = tuple[float, float]


def analyze_trace(path: str | os.PathLike[str], *, top_k: int = 10) -> TraceAnalysis:
    """Read the Chrome trace at ``path`` (as written by ``torch.profiler``) and summarise it.

    >>> import json, os, tempfile
    >>> p = os.path.join(tempfile.mkdtemp(), "t.json")
    >>> op = {"ph": "X", "cat": "cpu_op", "pid": 1, "tid": 1}
    >>> events = [{**op, "name": "aten::linear", "ts": 0, "dur": 30}]
    >>> events.append({**op, "name": "aten::mm", "ts": 5, "dur": 10})
    >>> _ = open(p, "w").write(json.dumps({"traceEvents": events}))
    >>> [(o.name, o.self_us) for o in analyze_trace(p).top_cpu_ops]
    [('aten::linear', 20.0), ('aten::mm', 10.0)]
    """
    _check_top_k(top_k)
    tables = read_tables(path)
    sections = _section_names(tables.metadata)
    section_ids = {tables.name_ids[n] for n in sections if n in tables.name_ids}
    main, windows, labels = _windows(tables)
    span_us = sum(end - start for start, end in windows)
    splits = _phase_splits(tables, main, windows, labels)
    ops = _op_stats(tables, section_ids)
    kernels = _kernel_stats(tables)
    analysis = TraceAnalysis(
        path=str(path),
        event_count=tables.event_count,
        step_count=len(tables.steps[main].start) if main in tables.steps else 0,
        span_us=span_us,
        top_cpu_ops=tuple(ops[:top_k]),
        top_cuda_kernels=tuple(kernels[:top_k]),
        gpu_busy_share=_gpu_busy_share(tables, windows),
        memory=tuple(MemoryPeak(d, a, r) for d, (a, r) in sorted(tables.memory.items())),
        phases=_sum_splits(splits),
        per_step=tuple(splits),
        sections=_section_stats(tables, sections, windows, span_us),
        findings=(),
    )
    return replace(analysis, findings=find_bottlenecks(analysis))


def diff_traces(
    path_a: str | os.PathLike[str], path_b: str | os.PathLike[str], *, top_k: int = 10
) -> TraceDiff:
    """Compare two trace windows per step: phases, ops whose self time grew, new ops, sections.

    ``perfkit diff before.json.gz after.json.gz`` prints the same comparison.
    """
    _check_top_k(top_k)
    a, b = analyze_trace(path_a, top_k=sys.maxsize), analyze_trace(path_b, top_k=sys.maxsize)
    steps_a, steps_b = max(a.step_count, 1), max(b.step_count, 1)
    ops_a = {o.name: o.self_us / steps_a for o in a.top_cpu_ops}
    ops_b = {o.name: o.self_us / steps_b for o in b.top_cpu_ops}
    grown = [TimeChange(n, ops_a[n], us) for n, us in ops_b.items() if n in ops_a and us > ops_a[n]]
    new = [TimeChange(n, 0.0, us) for n, us in ops_b.items() if n not in ops_a]
    sec_a = {s.name: s.total_us / steps_a for s in a.sections}
    sec_b = {s.name: s.total_us / steps_b for s in b.sections}
    sections = [TimeChange(n, sec_a.get(n, 0.0), us) for n, us in sec_b.items() if us > sec_a.get(n, 0.0)]
    phases = tuple(
        PhaseChange(
            p, a.phases.us(p) / steps_a, b.phases.us(p) / steps_b, a.phases.share(p), b.phases.share(p)
        )
        for p in ALL_PHASES
    )
    return TraceDiff(
        before=a.path,
        after=b.path,
        before_steps=a.step_count,
        after_steps=b.step_count,
        before_step_us=a.span_us / steps_a,
        after_step_us=b.span_us / steps_b,
        phases=phases,
        grown_ops=tuple(sorted(grown, key=lambda c: -c.change_us)[:top_k]),
        new_ops=tuple(sorted(new, key=lambda c: -c.after_us)[:top_k]),
        grown_sections=tuple(sorted(sections, key=lambda c: -c.change_us)),
    )


def _check_top_k(top_k: object) -> None:
    if not isinstance(top_k, int) or isinstance(top_k, bool) or top_k < 1:
        raise ValueError(f"top_k must be an int >= 1, got {top_k!r}")


def _section_names(metadata: dict[str, object]) -> list[str]:
    """Section names from the top-level ``"perfkit"`` key (an object, or JSON text in a string)."""
    value = metadata.get(TRACE_METADATA_KEY)
    if isinstance(value, str):  # written with add_metadata, which stores a string
        try:
            value = json.loads(value)
        except ValueError:
            return []
    names = value.get("sections") if isinstance(value, dict) else None
    if not isinstance(names, list):
        return []
    return list(dict.fromkeys(n for n in names if isinstance(n, str)))


def _windows(tables: TraceTables) -> tuple[Thread | None, list[Window], list[str]]:
    """The main thread and its windows: its ``ProfilerStep#N`` ranges, else its whole span."""
    if tables.steps:
        main = max(tables.steps, key=lambda t: len(tables.steps[t].start))
        start, dur, code = tables.steps[main].columns()
        windows: list[Window] = []
        labels: list[str] = []
        for i in np.argsort(start, kind="stable").tolist():
            begin = max(float(start[i]), windows[-1][1] if windows else float("-inf"))
            windows.append((begin, max(begin, float(start[i] + dur[i]))))
            labels.append(f"ProfilerStep#{int(code[i])}" if code[i] >= 0 else "ProfilerStep")
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
    return main, [(spans[main][0], spans[main][1])], ["whole trace"]


def _phase_splits(
    tables: TraceTables, main: Thread | None, windows: Sequence[Window], labels: Sequence[str]
) -> list[PhaseSplit]:
    marks = tables.marks.get(main) if main is not None else None
    if marks is not None:
        per_window = split_phases(mark_rows(marks), windows)
    else:
        per_window = np.zeros((len(windows), len(ALL_PHASES) - 1))
    splits = []
    for (begin, end), label, row in zip(windows, labels, per_window.tolist(), strict=True):
        total = end - begin
        data, forward, backward, optimizer = row
        unaccounted = max(0.0, total - sum(row))
        splits.append(PhaseSplit(label, total, data, forward, backward, optimizer, unaccounted))
    return splits


def _sum_splits(splits: Sequence[PhaseSplit]) -> PhaseSplit:
    label = "all steps" if len(splits) != 1 else splits[0].label
    totals = [sum(s.us(p) for s in splits) for p in ALL_PHASES]
    return PhaseSplit(label, sum(s.total_us for s in splits), *totals)


def _op_stats(tables: TraceTables, exclude: set[int]) -> list[OpStat]:
    times = tables.op_times(exclude)
    all_self = sum(row[1] for row in times.values())
    rows = [
        OpStat(tables.names[nid], int(c), s, t, s / all_self if all_self > 0 else 0.0)
        for nid, (c, s, t) in times.items()
    ]
    return sorted(rows, key=lambda o: (-o.self_us, o.name))


def _kernel_stats(tables: TraceTables) -> list[KernelStat]:
    all_us = sum(total for _, total in tables.gpu.values())
    rows = [
        KernelStat(name, kind, int(count), total, total / all_us if all_us > 0 else 0.0)
        for (kind, name), (count, total) in tables.gpu.items()
    ]
    return sorted(rows, key=lambda k: (-k.total_us, k.name))


def _gpu_busy_share(tables: TraceTables, windows: Sequence[Window]) -> float | None:
    """Union of kernel intervals inside the profiled span, over that span's length."""
    if not len(tables.kernels.start) or not windows or windows[-1][1] <= windows[0][0]:
        return None
    lo, hi = windows[0][0], windows[-1][1]
    start, dur, _ = tables.kernels.columns()
    order = np.argsort(start, kind="stable")
    s, e = start[order], (start + dur)[order]
    reach = np.maximum.accumulate(e)
    new = np.ones(len(s), dtype=bool)
    new[1:] = s[1:] > reach[:-1]  # a kernel starting after all earlier ones ended opens a busy run
    last = np.append(np.flatnonzero(new)[1:] - 1, len(s) - 1)
    busy = np.clip(reach[last], lo, hi) - np.clip(s[new], lo, hi)
    return float(busy.sum()) / (hi - lo)


def _section_stats(
    tables: TraceTables, names: Sequence[str], windows: Sequence[Window], span_us: float
) -> tuple[SectionStat, ...]:
    """Each section's ranges (on any thread) clipped to the step windows."""
    w_start = np.array([w[0] for w in windows])
    w_len = np.array([w[1] - w[0] for w in windows])
    before = np.concatenate(([0.0], np.cumsum(w_len)))

    def covered(x: np.ndarray) -> np.ndarray:  # window time before each instant x
        k = np.searchsorted(w_start, x, side="right") - 1
        inside = np.clip(x - w_start[np.maximum(k, 0)], 0.0, w_len[np.maximum(k, 0)])
        return np.where(k >= 0, before[np.maximum(k, 0)] + inside, 0.0)

    stats = []
    for name in names:
        nid = tables.name_ids.get(name, -1)
        count, total = 0, 0.0
        for table in (tables.annotations, tables.ops):
            for ranges in table.values():
                start, dur, code = ranges.columns()
                mine = code == nid
                if windows and mine.any():
                    overlap = covered(start[mine] + dur[mine]) - covered(start[mine])
                    count += int((overlap > 0).sum())
                    total += float(overlap.sum())
        stats.append(SectionStat(name, count, total, total / span_us if span_us > 0 else 0.0))
    return tuple(sorted(stats, key=lambda s: -s.total_us))
