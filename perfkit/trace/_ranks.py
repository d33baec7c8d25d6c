"""``analyze_ranks``: the traces of a distributed run's ranks side by side, and the straggler.

Each trace file of the directory is analysed in turn and only its summary kept, so memory
stays at one trace's tables. In collective training the fast ranks wait for the slow one inside
the collectives, so their step times converge; a rank's *work* per step is therefore its step
time minus its exposed communication (communication kernels with no compute kernel beside
them, mostly that waiting). The straggler is the rank with the most work per step, when it
exceeds the median of the others by ``STRAGGLER_MIN_EXCESS``; what makes it slow is the part of
the step and the device kernels whose time per step exceeds the others' median most.

    r = analyze_ranks("traces/")     # rank-0.json.gz, rank-1.json.gz, ...
    r.straggler.rank, r.straggler.causes[0]
"""

from __future__ import annotations

import os
import re
import statistics
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from .._validate import check_int
from ._analysis import analyze_trace
from ._parts import ALL_PARTS
from ._results import TraceAnalysis

STRAGGLER_MIN_EXCESS = 0.01  # of the others' median work per step
CAUSES = 3  # causes named for the straggler
_CAUSE_POOL = 50  # kernels per rank compared when looking for the causes
_TRACE_SUFFIXES = (".json", ".json.gz")
_RANK_IN_NAME = re.compile(r"rank[-_]?(\d+)", re.IGNORECASE)


@dataclass(frozen=True)
class Cause:
    """A part or device kernel whose time per step on the straggler exceeds the other ranks' median."""

    kind: str  # "part" or "kernel"
    name: str
    rank_us: float
    others_us: float


@dataclass(frozen=True)
class Straggler:
    """The rank that makes the others wait: its work per step against the others' median."""

    rank: int
    path: str
    work_us: float
    others_work_us: float
    causes: tuple[Cause, ...]

    @property
    def excess(self) -> float:
        return self.work_us / self.others_work_us - 1 if self.others_work_us > 0 else 0.0


@dataclass(frozen=True)
class RanksAnalysis:
    """Every rank's :class:`TraceAnalysis` (in rank order) and the straggler, if one stands out."""

    directory: str
    ranks: tuple[TraceAnalysis, ...]
    straggler: Straggler | None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"directory": self.directory, "ranks": [a.to_dict() for a in self.ranks]}
        out["straggler"] = None if self.straggler is None else asdict(self.straggler)
        return out


def analyze_ranks(directory: str | os.PathLike[str], *, top_k: int = 10) -> RanksAnalysis:
    """Analyse every trace file (``*.json``, ``*.json.gz``) of ``directory``, one at a time.

    A rank is the trace's ``distributedInfo.rank``, else a ``rank-N`` in the file name, else
    the file's position. Raises ``ValueError`` for a directory without traces.

    >>> import json, os, tempfile
    >>> folder = tempfile.mkdtemp()
    >>> for rank, gemm in ((0, 50), (1, 80)):  # then an all-reduce waits for the slower rank
    ...     step = {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "ts": 0, "dur": 100}
    ...     work = {"ph": "X", "cat": "kernel", "tid": 7, "name": "gemm", "ts": 0, "dur": gemm}
    ...     wait = {"ph": "X", "cat": "kernel", "tid": 9, "name": "ncclKernel", "ts": gemm, "dur": 100 - gemm}
    ...     text = json.dumps({"traceEvents": [step, work, wait]})
    ...     _ = open(os.path.join(folder, f"rank-{rank}.json"), "w").write(text)
    >>> r = analyze_ranks(folder)
    >>> r.straggler.rank, r.straggler.work_us, r.straggler.causes[0]
    (1, 80.0, Cause(kind='kernel', name='gemm', rank_us=80.0, others_us=50.0))
    """
    check_int(top_k, "top_k", low=1)
    folder = Path(directory)
    if not folder.is_dir():
        raise FileNotFoundError(f"not a directory: {str(folder)!r}")
    files = sorted(p for p in folder.iterdir() if p.is_file() and p.name.endswith(_TRACE_SUFFIXES))
    if not files:
        raise ValueError(f"no trace files (*.json, *.json.gz) in {str(folder)!r}")
    analyses = []
    for i, path in enumerate(files):
        a = analyze_trace(path, top_k=max(top_k, _CAUSE_POOL))
        found = _RANK_IN_NAME.search(path.name)
        named = int(found.group(1)) if found and len(found.group(1)) < 10 else i
        analyses.append(replace(a, rank=a.rank if a.rank is not None else named))
    analyses.sort(key=lambda a: (a.rank, a.path))
    straggler = find_straggler(analyses)
    return RanksAnalysis(str(folder), tuple(_trim(a, top_k) for a in analyses), straggler)


def _trim(a: TraceAnalysis, top_k: int) -> TraceAnalysis:
    """``a`` with ``top_k`` rows per table (it was analysed with more, to compare kernels across ranks)."""
    return replace(
        a,
        top_cpu_ops=a.top_cpu_ops[:top_k],
        top_cuda_kernels=a.top_cuda_kernels[:top_k],
        transfers=a.transfers[:top_k],
        annotations=a.annotations[:top_k],
        idle=a.idle[: top_k + 1],
    )


def work_per_step(a: TraceAnalysis) -> float:
    """Step time minus exposed communication, per step (µs)."""
    exposed = 0.0 if a.comm is None else a.comm.comm_us - a.comm.overlap_us
    return (a.span_us - exposed) / max(a.step_count, 1)


def find_straggler(ranks: Sequence[TraceAnalysis]) -> Straggler | None:
    """The rank whose work per step exceeds the others' median most, if by ``STRAGGLER_MIN_EXCESS``."""
    if len(ranks) < 2:
        return None
    slow = max(ranks, key=work_per_step)
    others = [a for a in ranks if a is not slow]
    median = statistics.median(work_per_step(a) for a in others)
    if work_per_step(slow) <= median * (1 + STRAGGLER_MIN_EXCESS):
        return None
    assert slow.rank is not None
    return Straggler(slow.rank, slow.path, work_per_step(slow), median, _causes(slow, others))


def _causes(slow: TraceAnalysis, others: Sequence[TraceAnalysis]) -> tuple[Cause, ...]:
    """The part, then the kernels, whose time per step exceeds the others' median most."""
    parts = [_cause("part", p, slow, others, lambda a, p: a.parts.us(p)) for p in ALL_PARTS]
    kernels = [_cause("kernel", n, slow, others, _kernel_us) for n in {k.name for k in slow.top_cuda_kernels}]
    top_part = sorted((c for c in parts if c.rank_us > c.others_us), key=_excess, reverse=True)[:1]
    top_kernels = sorted((c for c in kernels if c.rank_us > c.others_us), key=_excess, reverse=True)
    return (*top_part, *top_kernels[: CAUSES - len(top_part)])


def _cause(
    kind: str,
    name: str,
    slow: TraceAnalysis,
    others: Sequence[TraceAnalysis],
    us: Callable[[TraceAnalysis, str], float],
) -> Cause:
    per_step = [us(a, name) / max(a.step_count, 1) for a in others]
    return Cause(kind, name, us(slow, name) / max(slow.step_count, 1), statistics.median(per_step))


def _kernel_us(a: TraceAnalysis, name: str) -> float:
    return sum(k.total_us for k in a.top_cuda_kernels if k.name == name)


def _excess(c: Cause) -> float:
    return c.rank_us - c.others_us
