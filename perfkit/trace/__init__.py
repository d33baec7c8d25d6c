"""Offline analysis of torch.profiler (Kineto) Chrome traces; needs no torch.

    a = analyze_trace("profiler_traces/val_epoch1.pt.trace.json.gz")
    print(format_analysis(a))
    print(format_diff(diff_traces("before.json.gz", "after.json.gz")))

The same from the shell: ``perfkit analyze TRACE``, ``perfkit diff A B``.
"""

from ._analysis import analyze_trace, diff_traces
from ._events import iter_trace_events
from ._format import format_analysis, format_diff
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

__all__ = [
    "KernelStat",
    "MemoryPeak",
    "OpStat",
    "PhaseChange",
    "PhaseSplit",
    "SectionStat",
    "TimeChange",
    "TraceAnalysis",
    "TraceDiff",
    "analyze_trace",
    "diff_traces",
    "format_analysis",
    "format_diff",
    "iter_trace_events",
]
