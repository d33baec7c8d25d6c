"""Findings: what a run's windows or a profiler trace say in plain words, each rule a small object.

    d = diagnose(read_run("runs/exp1"))         # verdicts, most important first
    print(d.top.line)
    find_bottlenecks(analyze_trace("t.json"))   # a trace's findings

Verdict kinds, the rules behind them and their thresholds: docs/diagnosis.md.
"""

from .._rule import Abstention, Verdict, severity
from ..trace import find_bottlenecks
from ._case import Case
from ._change import CHANGE, Timeline
from ._compare import Comparison, PartChange, compare_runs
from ._diagnose import UNJUDGED, diagnose, diagnose_windows, judge
from ._store import write_diagnosis
from ._verdict import Diagnosis, StageSummary
from .rules import KINDS, RULES, Rule, TopSubject

__all__ = [
    "CHANGE",
    "KINDS",
    "RULES",
    "UNJUDGED",
    "Abstention",
    "Case",
    "Comparison",
    "Diagnosis",
    "PartChange",
    "Rule",
    "StageSummary",
    "Timeline",
    "TopSubject",
    "Verdict",
    "compare_runs",
    "diagnose",
    "diagnose_windows",
    "find_bottlenecks",
    "judge",
    "severity",
    "write_diagnosis",
]
