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
from ._rules import TRACE_KINDS, TRACE_RULES, find_bottlenecks

__all__ = [
    "ALL_PHASES",
    "TRACE_KINDS",
    "TRACE_RULES",
    "AnnotationStat",
    "Cause",
    "Changes",
    "CommOverlap",
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


def __getattr__(name: str) -> object:
    """``Finding``, the old name of a trace's findings' type: every rule now concludes a ``Verdict``."""
    if name == "Finding":
        import warnings

        from .._rule import Verdict

        warnings.warn(
            "perfkit.trace.Finding is now perfkit.findings.Verdict (one result type for every rule)",
            FutureWarning,
            stacklevel=2,
        )
        return Verdict
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
