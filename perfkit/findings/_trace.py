"""Bottleneck findings: a share of time past a threshold, said in words with its number.

Thresholds are fractions; a finding's ``value`` is the share that crossed one (for the GPU,
the idle share), so sorting by value puts the biggest problem first.

    >>> DATA_LOADING_MIN_SHARE
    0.3
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._units import format_seconds, plural
from ._finding import Finding

if TYPE_CHECKING:
    from ..trace import TraceAnalysis

DATA_LOADING_MIN_SHARE = 0.30  # of step time
SECTION_MIN_SHARE = 0.50  # of step time, one perfkit section
CPU_OP_MIN_SHARE = 0.40  # of all CPU op self time, one op
GPU_BUSY_MAX_SHARE = 0.50  # of the profiled span, when the trace has kernels
OPTIMIZER_MIN_SHARE = 0.30  # of step time
UNACCOUNTED_MIN_SHARE = 0.40  # of step time


def find_bottlenecks(analysis: TraceAnalysis) -> tuple[Finding, ...]:
    """The findings for ``analysis``, largest value first; often none."""
    phases = analysis.phases
    found: list[Finding] = []
    data = phases.share("data_loading")
    if data >= DATA_LOADING_MIN_SHARE:
        found.append(
            Finding(
                "data_loading",
                f"data loader waits take {data:.1%} of step time:"
                " more workers or a cheaper collate would help",
                data,
            )
        )
    found += [
        Finding("section", f"section {s.name!r} takes {s.share:.1%} of step time", s.share)
        for s in analysis.sections
        if s.share >= SECTION_MIN_SHARE
    ]
    if analysis.top_cpu_ops and analysis.top_cpu_ops[0].share >= CPU_OP_MIN_SHARE:
        op = analysis.top_cpu_ops[0]
        found.append(
            Finding(
                "cpu_op",
                f"{op.name} takes {op.share:.1%} of CPU op self time"
                f" ({format_seconds(op.self_us / 1e6)} over {plural(op.count, 'call')})",
                op.share,
            )
        )
    busy = analysis.gpu_busy_share
    if busy is not None and busy < GPU_BUSY_MAX_SHARE:
        found.append(
            Finding(
                "gpu_idle",
                f"the GPU is idle {1 - busy:.1%} of the profiled time (busy {busy:.1%}):"
                " it waits for the CPU",
                1 - busy,
            )
        )
    optimizer = phases.share("optimizer")
    if optimizer >= OPTIMIZER_MIN_SHARE:
        found.append(
            Finding(
                "optimizer",
                f"the optimizer step takes {optimizer:.1%} of step time:"
                " a fused or foreach optimizer may help",
                optimizer,
            )
        )
    untracked = phases.share("unaccounted")
    if untracked >= UNACCOUNTED_MIN_SHARE:
        found.append(
            Finding(
                "unaccounted",
                f"{untracked:.1%} of step time is outside any phase mark"
                " (untracked work, e.g. Python between the marked phases)",
                untracked,
            )
        )
    return tuple(sorted(found, key=lambda f: -f.value))
