"""Findings: what a run's windows or a profiler trace say in plain words, each rule a small function.

run_findings(read_run("runs/exp1"))         # the run's findings, most important first
find_bottlenecks(analyze_trace("t.json"))   # a trace's findings
"""

from ._finding import Finding
from ._run import run_findings
from ._trace import find_bottlenecks

__all__ = ["Finding", "find_bottlenecks", "run_findings"]
