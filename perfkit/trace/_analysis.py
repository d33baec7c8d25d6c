"""``analyze_trace``: where the steps of a torch profiler trace spent their time.

The trace is streamed (``.json`` or ``.json.gz``, no torch needed) into compact tables, then
summarised: the split of step time into parts (data wait / forward / backward / optimizer /
other) and where each came from, device activity (busy share, idle gaps by cause,
copies' bandwidth, communication overlap), top CPU ops by self time, top device activities,
memory peaks, user annotations, perfkit's sections, and plain-words findings.

    a = perfkit.trace.analyze_trace("profiler_traces/train_epoch1.pt.trace.json.gz")
    a.parts.share("data_wait")                  # 0.62
    print(perfkit.reports.analysis_text(a))
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from .._validate import check_int
from ..names import OTHER, TRACE_METADATA_KEY
from ._columns import Window, clipped_by_code
from ._device import DeviceColumns, comm_overlap, idle_breakdown, kernel_stats, transfer_stats
from ._parts import ALL_PARTS, PARTS, SOURCES
from ._results import (
    AnnotationStat,
    MemoryPeak,
    OpStat,
    PartSource,
    PartSplit,
    SectionStat,
    Skipped,
    TraceAnalysis,
)
from ._rules import find_bottlenecks
from ._tables import KERNEL, TraceTables, read_tables
from ._timeline import SOURCE_NAMES_PER_PART, Split, other_annotations, part_split, step_windows


def analyze_trace(path: str | os.PathLike[str], *, top_k: int = 10) -> TraceAnalysis:
    """Read the Chrome trace at ``path`` (as written by ``torch.profiler``) and summarise it.

    ``top_k`` bounds every table (ops, device activities, copies, annotations). Malformed
    events are skipped and counted in ``skipped``; a file that is not a trace raises
    ``ValueError`` naming the file and the offset.

    >>> import json, os, tempfile
    >>> p = os.path.join(tempfile.mkdtemp(), "t.json")
    >>> op = {"ph": "X", "cat": "cpu_op", "pid": 1, "tid": 1}
    >>> events = [{**op, "name": "aten::linear", "ts": 0, "dur": 30}]
    >>> events.append({**op, "name": "aten::mm", "ts": 5, "dur": 10})
    >>> _ = open(p, "w").write(json.dumps({"traceEvents": events}))
    >>> [(o.name, o.self_us) for o in analyze_trace(p).top_cpu_ops]
    [('aten::linear', 20.0), ('aten::mm', 10.0)]
    """
    check_int(top_k, "top_k", low=1)
    tables = read_tables(path)
    main, windows, labels = step_windows(tables)
    span_us = sum(end - start for start, end in windows)
    split = part_split(tables, main, windows)
    splits = _splits(split, windows, labels)
    sections = _section_names(tables.metadata)
    section_ids = {tables.name_ids[n] for n in sections if n in tables.name_ids}
    dev = DeviceColumns(tables)
    has_device = len(dev.start) > 0 and span_us > 0
    analysis = TraceAnalysis(
        path=str(path),
        event_count=tables.event_count,
        step_count=len(tables.steps[main]) if main in tables.steps else 0,
        span_us=span_us,
        top_cpu_ops=tuple(_op_stats(tables, section_ids)[:top_k]),
        top_cuda_kernels=tuple(kernel_stats(tables)[:top_k]),
        gpu_busy_share=dev.busy(windows) / span_us if has_device else None,
        kernel_busy_share=dev.busy(windows, dev.kind == KERNEL) / span_us if has_device else None,
        unlaunched_device_us=dev.busy(windows, np.isnan(dev.launch)) if has_device else 0.0,
        idle=idle_breakdown(dev, windows)[: top_k + 1] if has_device else (),
        transfers=tuple(transfer_stats(tables)[:top_k]),
        comm=comm_overlap(dev, windows) if has_device else None,
        memory=memory_peaks(tables),
        parts=_sum_splits(splits),
        per_step=tuple(splits),
        part_sources=_sources(tables, main, split, span_us),
        sections=_section_stats(tables, sections, windows, span_us),
        annotations=_annotations(tables, windows, span_us)[:top_k],
        skipped=tuple(Skipped(r, n) for r, n in sorted(tables.skipped.items(), key=lambda x: -x[1])),
        rank=_rank(tables.metadata),
        findings=(),
    )
    return replace(analysis, findings=find_bottlenecks(analysis))


def _section_names(metadata: dict[str, object]) -> list[str]:
    """Section names from the top-level ``"perfkit"`` key (an object, or JSON text in a string)."""
    value = metadata.get(TRACE_METADATA_KEY)
    if isinstance(value, str):  # written with add_metadata, which stores a string
        try:
            value = json.loads(value)
        except (ValueError, RecursionError):
            return []
    names = value.get("sections") if isinstance(value, dict) else None
    if not isinstance(names, list):
        return []
    return list(dict.fromkeys(n for n in names if isinstance(n, str)))


def _rank(metadata: dict[str, object]) -> int | None:
    info = metadata.get("distributedInfo")
    rank = info.get("rank") if isinstance(info, dict) else None
    return rank if isinstance(rank, int) and not isinstance(rank, bool) and 0 <= rank < 2**31 else None


def _splits(split: Split, windows: Sequence[Window], labels: Sequence[str]) -> list[PartSplit]:
    out = []
    for (begin, end), label, row in zip(windows, labels, split.per_window.tolist(), strict=True):
        data, forward, backward, optimizer = row
        other = max(0.0, (end - begin) - sum(row))
        out.append(PartSplit(label, end - begin, data, forward, backward, optimizer, other))
    return out


def _sum_splits(splits: Sequence[PartSplit]) -> PartSplit:
    label = "all steps" if len(splits) != 1 else splits[0].label
    totals = [sum(s.us(p) for s in splits) for p in ALL_PARTS]
    return PartSplit(label, sum(s.total_us for s in splits), *totals)


def _sources(tables: TraceTables, main: object, split: Split, span_us: float) -> tuple[PartSource, ...]:
    """Per part and source, the marks with most time; then what the other time lies in."""
    picked: dict[tuple[int, int], list[tuple[str, float]]] = {}
    for (part, source, name), us in split.by_mark.items():
        picked.setdefault((part, source), []).append((name, us))
    rows = []
    for (part, source), named in sorted(picked.items(), key=lambda kv: (kv[0][0], -sum(u for _, u in kv[1]))):
        for name, us in sorted(named, key=lambda x: -x[1])[:SOURCE_NAMES_PER_PART]:
            rows.append(PartSource(PARTS[part], SOURCES[source], name, us, _share(us, span_us)))
    gaps = other_annotations(tables, main, split.other)  # type: ignore[arg-type]
    for name, us in gaps[:SOURCE_NAMES_PER_PART]:
        rows.append(PartSource(OTHER, "annotation", name, us, _share(us, span_us)))
    return tuple(rows)


def _share(us: float, span_us: float) -> float:
    return us / span_us if span_us > 0 else 0.0


def _op_stats(tables: TraceTables, exclude: set[int]) -> list[OpStat]:
    times = tables.op_times(exclude)
    all_self = sum(row[1] for row in times.values())
    rows = [
        OpStat(tables.names[nid], int(c), s, t, s / all_self if all_self > 0 else 0.0)
        for nid, (c, s, t) in times.items()
    ]
    return sorted(rows, key=lambda o: (-o.self_us, o.name))


def memory_peaks(tables: TraceTables) -> tuple[MemoryPeak, ...]:
    """Per device: the highest ``Total Allocated``, else the peak of the running sum of ``Bytes``."""
    out = []
    for device, columns in sorted(tables.memory.items()):
        ts, delta, allocated, reserved = (np.frombuffer(c) for c in columns)
        if not np.isnan(allocated).all():
            top_reserved = 0.0 if np.isnan(reserved).all() else float(np.nanmax(reserved))
            out.append(MemoryPeak(device, int(np.nanmax(allocated)), int(top_reserved)))
            continue
        running = np.cumsum(np.nan_to_num(delta[np.argsort(ts, kind="stable")]))
        out.append(MemoryPeak(device, int(max(0.0, float(running.max()))), 0, "Bytes running sum"))
    return tuple(out)


def _annotations(
    tables: TraceTables, windows: Sequence[Window], span_us: float
) -> tuple[AnnotationStat, ...]:
    """CPU and GPU user annotations by name, time inside the steps, most first."""
    cpu = clipped_by_code(list(tables.annotations.values()), windows)
    gpu = clipped_by_code([tables.gpu_annotations], windows)
    rows = [
        AnnotationStat(tables.names[nid], kind, count, us, _share(us, span_us))
        for kind, found in (("cpu", cpu), ("gpu", gpu))
        for nid, (count, us) in found.items()
    ]
    return tuple(sorted(rows, key=lambda a: (-a.total_us, a.name, a.kind)))


def _section_stats(
    tables: TraceTables, names: Sequence[str], windows: Sequence[Window], span_us: float
) -> tuple[SectionStat, ...]:
    """Each section's ranges (on any thread, as annotation or op) clipped to the windows."""
    ids = {tables.name_ids[n] for n in names if n in tables.name_ids}
    found = clipped_by_code([*tables.annotations.values(), *tables.ops.values()], windows, ids)
    stats = []
    for name in names:
        count, us = found.get(tables.name_ids.get(name, -1), (0, 0.0))
        stats.append(SectionStat(name, count, us, _share(us, span_us)))
    return tuple(sorted(stats, key=lambda s: -s.total_us))
