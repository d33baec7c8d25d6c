"""perfkit: find out where a PyTorch training or validation loop spends its time.

    import perfkit

    @perfkit.timed                                  # a function, method, coroutine or generator
    def collate(samples): ...

    start = perfkit.cursor()                        # open a window (an epoch, a phase)
    for batch in perfkit.timed_iter(loader, "train"):   # time spent waiting for each batch
        with perfkit.section("forward"):            # a block, nested sections form a tree
            ...
    print(perfkit.report(perfkit.snapshot(since=start)))

Records go to a bounded, thread-safe registry; snapshots give count, total,
mean, median, p95, p99, std, min and max per series over any window.
"""

from ._api import cursor, reset, snapshot
from ._chrome import write_chrome_trace
from ._clock import Clock, monotonic_ns
from ._context import ThreadInfo
from ._gauges import GaugeData, GaugeStats
from ._iteration import SizedTimedIterator, TimedIterator, timed_iter
from ._loops import LoopStats, all_loops, loop_stats
from ._phases import PhaseWindow, SlowStep, data_series, metric_key, phase_metrics, step_series
from ._registry import Cursor, Registry, get_registry, use_registry
from ._report import report
from ._report_html import write_html_report
from ._report_upload import attach_report_to_wandb, log_report_to_mlflow
from ._run_reader import RunData, RunTrace, RunWindow, read_run
from ._rundir import RunWriter
from ._sampler import ResourceSampler
from ._section import Section, section
from ._sinks import JsonlSink, MlflowSink, Sink, WandbSink
from ._snapshot import NodeTotals, Snapshot
from ._sources import NvmlSource, ProcessSource, Source, SourceUnavailable, TorchCudaSource
from ._standalone import ScriptWindow, batch_size, window
from ._state import Tracer, disable, enable, is_enabled, set_tracer
from ._stats import SeriesData, Stats
from ._timing import timed
from ._trace_analysis import analyze_trace, diff_traces
from ._trace_format import format_analysis, format_diff
from ._trace_results import (
    Finding,
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
from ._units import format_seconds
from ._warn import PerfkitWarning
from ._window import Window

__version__ = "0.1.0"

__all__ = [
    "Clock",
    "Cursor",
    "Finding",
    "GaugeData",
    "GaugeStats",
    "JsonlSink",
    "KernelStat",
    "LoopStats",
    "MemoryPeak",
    "MlflowSink",
    "NodeTotals",
    "NvmlSource",
    "OpStat",
    "PerfkitWarning",
    "PhaseChange",
    "PhaseSplit",
    "PhaseWindow",
    "ProcessSource",
    "Registry",
    "ResourceSampler",
    "RunData",
    "RunTrace",
    "RunWindow",
    "RunWriter",
    "ScriptWindow",
    "Section",
    "SectionStat",
    "SeriesData",
    "Sink",
    "SizedTimedIterator",
    "SlowStep",
    "Snapshot",
    "Source",
    "SourceUnavailable",
    "Stats",
    "ThreadInfo",
    "TimeChange",
    "TimedIterator",
    "TorchCudaSource",
    "TraceAnalysis",
    "TraceDiff",
    "Tracer",
    "WandbSink",
    "Window",
    "__version__",
    "all_loops",
    "analyze_trace",
    "attach_report_to_wandb",
    "batch_size",
    "cursor",
    "data_series",
    "diff_traces",
    "disable",
    "enable",
    "format_analysis",
    "format_diff",
    "format_seconds",
    "get_registry",
    "is_enabled",
    "log_report_to_mlflow",
    "loop_stats",
    "metric_key",
    "monotonic_ns",
    "phase_metrics",
    "read_run",
    "report",
    "reset",
    "section",
    "set_tracer",
    "snapshot",
    "step_series",
    "timed",
    "timed_iter",
    "use_registry",
    "window",
    "write_chrome_trace",
    "write_html_report",
]
