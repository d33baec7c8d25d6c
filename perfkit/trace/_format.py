"""Text for trace analyses and diffs: a few ``[Profiler]`` lines, one topic each, for a log.

    print(format_analysis(analyze_trace("val_epoch1.pt.trace.json.gz")))
    [Profiler] Trace: val_epoch1.pt.trace.json.gz (1,234 events, 5 steps, 81.20 ms)
    [Profiler] Summary: dataloader 9.7%, forward 45.3%, backward 38.2%, optimizer 6.8%, unaccounted 0.0%

Durations use ``format_seconds``; shares are of step time (ops: of all CPU op self time).
"""

from __future__ import annotations

from .._units import format_seconds, plural
from ._phases import ALL_PHASES
from ._results import TraceAnalysis, TraceDiff

_PREFIX = "[Profiler]"
_LABELS = dict(
    zip(ALL_PHASES, ("dataloader", "forward", "backward", "optimizer", "unaccounted"), strict=True)
)


def format_analysis(analysis: TraceAnalysis, *, trace_path: str | None = None) -> str:
    """``analysis`` as ``[Profiler]`` lines; ``trace_path`` replaces the path shown.

    Lines for CUDA kernels, memory and sections appear only when the trace has them.
    """
    a = analysis
    lines = [
        f"Trace: {trace_path or a.path} ({a.event_count:,} events, {_steps(a.step_count)}, {_us(a.span_us)})"
    ]
    ops = ", ".join(
        f"{o.name} {o.share:.1%} ({_us(o.self_us)}, {plural(o.count, 'call')})" for o in a.top_cpu_ops
    )
    lines.append(f"Top {len(a.top_cpu_ops)} CPU operations: {ops or 'none'}")
    if a.top_cuda_kernels:
        kernels = ", ".join(
            f"{k.name} {k.share:.1%} ({_us(k.total_us)}, {plural(k.count, 'call')})"
            for k in a.top_cuda_kernels
        )
        busy = f"; GPU busy {a.gpu_busy_share:.1%}" if a.gpu_busy_share is not None else ""
        lines.append(f"Top CUDA kernels: {kernels}{busy}")
    if a.memory:
        peaks = [
            f"{m.device} {_bytes(m.allocated_bytes)} allocated"
            + (f", {_bytes(m.reserved_bytes)} reserved" if m.reserved_bytes else "")
            for m in a.memory
        ]
        lines.append("Memory peaks: " + "; ".join(peaks))
    lines.append("Summary: " + ", ".join(f"{_LABELS[p]} {a.phases.share(p):.1%}" for p in ALL_PHASES))
    if a.sections:
        lines.append("Sections: " + ", ".join(f"{s.name} {s.share:.1%}" for s in a.sections))
    lines.append("Bottlenecks: " + ("; ".join(f.message for f in a.findings) or "none found"))
    return "\n".join(f"{_PREFIX} {line}" for line in lines)


def format_diff(diff: TraceDiff) -> str:
    """``diff`` as ``[Profiler]`` lines: step time, phases, grown and new ops, grown sections."""
    d = diff
    change = (d.after_step_us / d.before_step_us - 1) if d.before_step_us > 0 else 0.0
    lines = [
        f"Diff: {d.before} ({_steps(d.before_steps)}) -> {d.after} ({_steps(d.after_steps)}):"
        f" {_us(d.before_step_us)} -> {_us(d.after_step_us)} per step ({change:+.1%})"
    ]
    lines.append(
        "Phases per step: "
        + ", ".join(
            f"{_LABELS[p.phase]} {_us(p.before_us)} -> {_us(p.after_us)}"
            f" ({_signed(p.change_us)}, {p.before_share:.1%} -> {p.after_share:.1%})"
            for p in d.phases
        )
    )
    grown = [
        f"{c.name} {_us(c.before_us)} -> {_us(c.after_us)} ({_signed(c.change_us)})" for c in d.grown_ops
    ]
    lines.append("Ops that grew per step: " + (", ".join(grown) or "none"))
    if d.new_ops:
        lines.append("New ops: " + ", ".join(f"{c.name} {_us(c.after_us)} per step" for c in d.new_ops))
    if d.grown_sections:
        sections = [
            f"{c.name} {_us(c.before_us)} -> {_us(c.after_us)} ({_signed(c.change_us)})"
            for c in d.grown_sections
        ]
        lines.append("Sections that grew per step: " + ", ".join(sections))
    return "\n".join(f"{_PREFIX} {line}" for line in lines)


def _steps(count: int) -> str:
    return plural(count, "step") if count else "no steps"


def _us(us: float) -> str:
    return format_seconds(us / 1e6)


def _signed(us: float) -> str:
    return ("+" if us >= 0 else "-") + format_seconds(abs(us) / 1e6)


def _bytes(n: int) -> str:
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"
