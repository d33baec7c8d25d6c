"""Offline analysis of torch.profiler (Kineto) Chrome traces; needs no torch.

    a = analyze_trace("profiler_traces/val_epoch1.pt.trace.json.gz")
    d = diff_traces("before.json.gz", "after.json.gz")
    r = analyze_ranks("traces/")                        # one trace per rank

Their text is ``perfkit.reports.analysis_text(a)``, ``diff_text(d)``, ``ranks_text(r)``; the same
from the shell: ``perfkit analyze TRACE_OR_DIR``, ``perfkit diff A B``. What each number means and
where each part of a step comes from: ``docs/trace-analysis.md``.
"""

from ._analysis import analyze_trace
from ._diff import Changes, TimeChange, TraceDiff, TracePartChange, diff_traces
from ._events import iter_trace_events
from ._parts import ALL_PARTS
from ._ranks import Cause, RanksAnalysis, Straggler, analyze_ranks, work_per_step
from ._results import (
    AnnotationStat,
    CommOverlap,
    KernelStat,
    MemoryPeak,
    OpStat,
    PartSource,
    PartSplit,
    SectionStat,
    Skipped,
    StreamIdle,
    TraceAnalysis,
    TransferStat,
)
from ._rules import TRACE_KINDS, TRACE_RULES, find_bottlenecks

__all__ = [
    "ALL_PARTS",
    "TRACE_KINDS",
    "TRACE_RULES",
    "AnnotationStat",
    "Cause",
    "Changes",
    "CommOverlap",
    "KernelStat",
    "MemoryPeak",
    "OpStat",
    "PartSource",
    "PartSplit",
    "RanksAnalysis",
    "SectionStat",
    "Skipped",
    "Straggler",
    "StreamIdle",
    "TimeChange",
    "TraceAnalysis",
    "TraceDiff",
    "TracePartChange",
    "TransferStat",
    "analyze_ranks",
    "analyze_trace",
    "diff_traces",
    "find_bottlenecks",
    "iter_trace_events",
    "work_per_step",
]
