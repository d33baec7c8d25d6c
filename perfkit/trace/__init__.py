"""Offline analysis of torch.profiler (Kineto) Chrome traces; needs no torch.

    a = analyze_trace("profiler_traces/val_epoch1.pt.trace.json.gz")
    print(format_analysis(a))
    print(format_diff(diff_traces("before.json.gz", "after.json.gz")))
    print(format_ranks(analyze_ranks("traces/")))       # one trace per rank

The same from the shell: ``perfkit analyze TRACE_OR_DIR``, ``perfkit diff A B``. What each number
means and where each phase comes from: ``docs/trace-analysis.md``.
"""

from ._analysis import analyze_trace
from ._diff import Changes, PhaseChange, TimeChange, TraceDiff, diff_traces
from ._events import iter_trace_events
from ._finding import Finding
from ._format import format_analysis
from ._format_compare import format_diff, format_ranks
from ._phases import ALL_PHASES
from ._ranks import Cause, RanksAnalysis, Straggler, analyze_ranks
from ._results import (
    AnnotationStat,
    CommOverlap,
    KernelStat,
    MemoryPeak,
    OpStat,
    PhaseSource,
    PhaseSplit,
    SectionStat,
    Skipped,
    StreamIdle,
    TraceAnalysis,
    TransferStat,
)
from ._rules import TRACE_RULES, TraceRule, find_bottlenecks

__all__ = [
    "ALL_PHASES",
    "TRACE_RULES",
    "AnnotationStat",
    "Cause",
    "Changes",
    "CommOverlap",
    "Finding",
    "KernelStat",
    "MemoryPeak",
    "OpStat",
    "PhaseChange",
    "PhaseSource",
    "PhaseSplit",
    "RanksAnalysis",
    "SectionStat",
    "Skipped",
    "Straggler",
    "StreamIdle",
    "TimeChange",
    "TraceAnalysis",
    "TraceDiff",
    "TraceRule",
    "TransferStat",
    "analyze_ranks",
    "analyze_trace",
    "diff_traces",
    "find_bottlenecks",
    "format_analysis",
    "format_diff",
    "format_ranks",
    "iter_trace_events",
]
