"""Offline analysis of torch.profiler (Kineto) Chrome traces; needs no torch.

    a = analyze_trace("profiler_traces/val_epoch1.pt.trace.json.gz")
    d = diff_traces("before.json.gz", "after.json.gz")
    r = analyze_ranks("traces/")                        # one trace per rank

Their text is ``perfkit.reports.analysis_text(a)``, ``diff_text(d)``, ``ranks_text(r)``; the same
from the shell: ``perfkit analyze TRACE_OR_DIR``, ``perfkit diff A B``. What each number means and
where each part of a step comes from: ``docs/trace-analysis.md``.
"""

from typing import Any

from .._rule import Verdict
from .._warn import warn_deprecated
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

# The names of perfkit 0.1 (a piece of a step's time was a "phase"; a finding was a ``Finding``),
# for one release.
_OLD_NAMES = {
    "ALL_PHASES": "ALL_PARTS",
    "PhaseChange": "TracePartChange",
    "PhaseSource": "PartSource",
    "PhaseSplit": "PartSplit",
    "Finding": "Verdict",
}


# Text renderers that moved up to perfkit.reports, where every text renderer lives (the trace
# reader sits below the reports, so it cannot hand them on: the error says where they went).
_MOVED = {
    "format_analysis": "perfkit.reports.analysis_text",
    "format_diff": "perfkit.reports.diff_text",
    "format_ranks": "perfkit.reports.ranks_text",
}


def __getattr__(name: str) -> Any:
    """An old name: the new object, with a ``FutureWarning`` that names it."""
    if name in _MOVED:
        raise AttributeError(f"perfkit.trace.{name} is now {_MOVED[name]}: import it from perfkit.reports")
    new = _OLD_NAMES.get(name)
    if new is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    warn_deprecated(f"perfkit.trace.{name} is now perfkit.trace.{new}; the old name goes in the next release")
    return Verdict if new == "Verdict" else globals()[new]
