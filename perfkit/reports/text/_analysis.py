"""Text for trace analyses: ``[Profiler]`` lines for a log, with a table per topic.

    print(analysis_text(analyze_trace("val_epoch1.pt.trace.json.gz")))
    [Profiler] Trace: val_epoch1.pt.trace.json.gz (1,234 events, 5 steps, 81.20 ms)
    [Profiler] Summary: data wait 9.7%, forward 45.3%, backward 38.2%, optimizer 6.8%, other 0.0%
    [Profiler] Top 10 CPU ops by self time:
    [Profiler]   self time  share  calls  name
    ...

Durations use ``format_seconds``; shares are of step time (ops: of all CPU op self time). Every
table has at most ``top_k`` rows (the analysis holds no more) and shortens names to ``width``
(the terminal's by default); ``--json`` keeps the full names.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence

from ..._display import display_name
from ..._units import format_bytes, plural
from ..._units import format_us as us
from ...trace import ALL_PARTS, TraceAnalysis
from ._lines import terminal_width
from ._table import block
from ._words import LABELS, ROOM, prefixed, steps_text


def analysis_text(analysis: TraceAnalysis, *, trace_path: str | None = None, width: int | None = None) -> str:
    """``analysis`` as ``[Profiler]`` lines; ``trace_path`` replaces the path shown.

    Lines for devices, memory, annotations and sections appear only when the trace has them.
    """
    a, w = analysis, (width or terminal_width()) - ROOM
    counts = f"{a.event_count:,} events, {steps_text(a.step_count)}, {us(a.span_us)}"
    lines = [f"Trace: {trace_path or a.path} ({counts})"]
    lines.append("Summary: " + ", ".join(f"{LABELS[p]} {a.parts.share(p):.1%}" for p in ALL_PARTS))
    lines += _sources(a, w) + _device(a, w) + _ops(a, w) + _kernels(a, w) + _annotations(a, w)
    if a.memory:
        lines.append(
            "Memory peaks: "
            + "; ".join(_peak(m.device, m.allocated_bytes, m.reserved_bytes, m.source) for m in a.memory)
        )
    if a.sections:
        lines.append("Sections: " + ", ".join(f"{display_name(s.name)} {s.share:.1%}" for s in a.sections))
    if a.skipped:
        lines.append("Skipped: " + "; ".join(f"{plural(s.count, 'event')}: {s.reason}" for s in a.skipped))
    lines += findings_lines([v.text for v in a.findings], w + 2)
    return prefixed(lines)


def findings_lines(messages: Sequence[str], width: int) -> list[str]:
    """One finding per item, wrapped to ``width``."""
    if not messages:
        return ["Bottlenecks: none found"]
    wrap = [
        textwrap.wrap(m, max(20, width), initial_indent="  - ", subsequent_indent="    ") for m in messages
    ]
    return ["Bottlenecks:", *(line for lines in wrap for line in lines)]


def _peak(device: str, allocated: int, reserved: int, source: str) -> str:
    text = f"{device} {format_bytes(allocated)} allocated"
    text += f", {format_bytes(reserved)} reserved" if reserved else ""
    return text + (" (running sum of Bytes)" if source != "Total Allocated" else "")


def _sources(a: TraceAnalysis, width: int) -> list[str]:
    if not a.part_sources:
        return []
    rows = [[f"{s.share:.1%}", LABELS[s.part], s.source, s.name] for s in a.part_sources]
    head = "Parts from (share of step time; other: inside annotations that mark no part):"
    return block(head, ["share", "part", "source", "mark"], rows, width=width, align="rll")


def _device(a: TraceAnalysis, width: int) -> list[str]:
    if a.gpu_busy_share is None:
        return []
    text = f"Device: busy {a.gpu_busy_share:.1%} of step time (kernels {a.kernel_busy_share or 0:.1%})"
    if a.unlaunched_device_us > 0:
        text += f"; {us(a.unlaunched_device_us)} of it has no launch in the trace (queued before profiling)"
    lines = [text]
    if a.comm is not None:
        c = a.comm
        lines.append(
            f"Communication: {us(c.comm_us)} in communication kernels,"
            f" {c.overlap_share:.1%} of it beside compute ({us(c.comm_us - c.overlap_us)} exposed)"
        )
    if a.idle:
        rows = [
            [us(s.busy_us), us(s.host_wait_us), us(s.kernel_wait_us), us(s.other_us), s.stream]
            for s in a.idle
        ]
        head = "Idle gaps inside the steps (host wait: not launched yet; kernel wait: launch gap; other):"
        lines += block(
            head, ["busy", "host wait", "kernel wait", "other", "stream"], rows, width=width, align="rrrr"
        )
    if a.transfers:
        rows = [
            [us(t.total_us), _rate(t.gb_per_s), format_bytes(t.total_bytes), f"{t.count:,}", t.name]
            for t in a.transfers
        ]
        head = f"Top {len(a.transfers)} copies and fills:"
        lines += block(head, ["time", "bandwidth", "bytes", "calls", "name"], rows, width=width, align="rrrr")
    return lines


def _rate(gb_per_s: float | None) -> str:
    return "-" if gb_per_s is None else f"{gb_per_s:.1f} GB/s"


def _ops(a: TraceAnalysis, width: int) -> list[str]:
    if not a.top_cpu_ops:
        return ["Top CPU ops: none"]
    rows = [[us(o.self_us), f"{o.share:.1%}", us(o.total_us), f"{o.count:,}", o.name] for o in a.top_cpu_ops]
    head = f"Top {len(rows)} CPU ops by self time (share of all op self time):"
    return block(head, ["self time", "share", "total", "calls", "op"], rows, width=width, align="rrrr")


def _kernels(a: TraceAnalysis, width: int) -> list[str]:
    if not a.top_cuda_kernels:
        return []
    rows = [[us(k.total_us), f"{k.share:.1%}", f"{k.count:,}", k.kind, k.name] for k in a.top_cuda_kernels]
    head = f"Top {len(rows)} device activities by time (share of all device time):"
    return block(head, ["time", "share", "calls", "kind", "name"], rows, width=width, align="rrrl")


def _annotations(a: TraceAnalysis, width: int) -> list[str]:
    if not a.annotations:
        return []
    rows = [[us(x.total_us), f"{x.share:.1%}", f"{x.count:,}", x.kind, x.name] for x in a.annotations]
    head = f"Top {len(rows)} annotations by time inside the steps:"
    return block(head, ["time", "share", "ranges", "kind", "annotation"], rows, width=width, align="rrrl")
