"""Bottleneck findings of a trace: each a small rule with a threshold, said in words with its number.

``TRACE_RULES`` is the list a trace's analysis is walked through; adding a finding is adding a
rule. Thresholds are fractions; a finding's ``value`` is the share that crossed one (for the
GPU, the idle share), so sorting by value puts the biggest problem first.

    >>> [rule.kind for rule in TRACE_RULES][:3]
    ['data_wait', 'section', 'cpu_op']
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .._units import format_seconds, plural
from ._finding import Finding

if TYPE_CHECKING:
    from ._results import TraceAnalysis

DATA_WAIT_MIN_SHARE = 0.30  # of step time
SECTION_MIN_SHARE = 0.50  # of step time, one perfkit section
CPU_OP_MIN_SHARE = 0.40  # of all CPU op self time, one op
GPU_BUSY_MAX_SHARE = 0.50  # of step time, when the trace has device activity
HOST_WAIT_MIN_SHARE = 0.50  # of the device's idle time, to say that it waits for the CPU
OPTIMIZER_MIN_SHARE = 0.30  # of step time
OTHER_MIN_SHARE = 0.40  # of step time
NAMED_MIN_PART = 0.25  # of the other time, for the annotation holding it to be named
EXPOSED_COMM_MIN_SHARE = 0.20  # of step time: communication with no compute kernel beside it


@dataclass(frozen=True)
class TraceRule:
    """One finding: its kind, what it looks for, and the check that returns the findings (often none)."""

    kind: str
    description: str
    check: Callable[[TraceAnalysis], Iterable[Finding]]


def find_bottlenecks(analysis: TraceAnalysis) -> tuple[Finding, ...]:
    """The findings of every rule in ``TRACE_RULES`` for ``analysis``, largest value first; often none."""
    found = [f for rule in TRACE_RULES for f in rule.check(analysis)]
    return tuple(sorted(found, key=lambda f: -f.value))


def _data_wait(a: TraceAnalysis) -> Iterable[Finding]:
    data = a.parts.share("data_wait")
    if data >= DATA_WAIT_MIN_SHARE:
        text = f"data loader waits take {data:.1%} of step time: more workers or a cheaper collate would help"
        yield Finding("data_wait", text, data)


def _sections(a: TraceAnalysis) -> Iterable[Finding]:
    for s in a.sections:
        if s.share >= SECTION_MIN_SHARE:
            yield Finding("section", f"section {s.name!r} takes {s.share:.1%} of step time", s.share)


def _cpu_op(a: TraceAnalysis) -> Iterable[Finding]:
    if a.top_cpu_ops and a.top_cpu_ops[0].share >= CPU_OP_MIN_SHARE:
        op = a.top_cpu_ops[0]
        text = (
            f"{op.name} takes {op.share:.1%} of CPU op self time"
            f" ({format_seconds(op.self_us / 1e6)} over {plural(op.count, 'call')})"
        )
        yield Finding("cpu_op", text, op.share)


def _gpu_idle(a: TraceAnalysis) -> Iterable[Finding]:
    busy = a.gpu_busy_share
    if busy is None or busy >= GPU_BUSY_MAX_SHARE:
        return
    text = f"the GPU is idle {1 - busy:.1%} of the profiled time (busy {busy:.1%})"
    device = a.idle[0] if a.idle else None
    if device is None or device.idle_us <= 0:
        yield Finding("gpu_idle", text, 1 - busy)
        return
    host, kernel, other = (
        x / device.idle_us for x in (device.host_wait_us, device.kernel_wait_us, device.other_us)
    )
    if host >= HOST_WAIT_MIN_SHARE:
        text += (
            f": it waits for the CPU (the next kernel was not launched yet in {host:.0%} of its idle time)"
        )
    else:
        text += (
            f", but not for the CPU: the next kernel was already launched in {kernel + other:.0%} of its"
            f" idle time (kernel wait {kernel:.0%}, other {other:.0%}: synchronisation, other streams or"
            " communication)"
        )
    yield Finding("gpu_idle", text, 1 - busy)


def _optimizer(a: TraceAnalysis) -> Iterable[Finding]:
    optimizer = a.parts.share("optimizer")
    if optimizer >= OPTIMIZER_MIN_SHARE:
        ops = (op.name for op in a.top_cpu_ops if "_foreach_" in op.name or "_fused_" in op.name)
        batched = next(ops, None)
        if batched is None:
            advice = "a fused or foreach optimizer may help"
        else:  # already batched: do not advise what the trace shows it does
            advice = f"it already runs batched ops ({batched}): stepping less often is what is left"
        text = f"the optimizer step takes {optimizer:.1%} of step time: {advice}"
        yield Finding("optimizer", text, optimizer)


def _other(a: TraceAnalysis) -> Iterable[Finding]:
    untracked = a.parts.share("other")
    if untracked < OTHER_MIN_SHARE:
        return
    text = f"{untracked:.1%} of step time is outside any part mark"
    # Name the annotation holding the other time only when it holds a good part of it.
    inside = [s for s in a.part_sources if s.part == "other" and s.share >= untracked * NAMED_MIN_PART]
    if inside:
        text += f", {inside[0].share:.1%} of step time inside {inside[0].name!r}"
    if not any(s.part == "forward" for s in a.part_sources):
        text += " (torch marks no forward pass: a record_function('## forward ##') range around it would)"
    elif not inside:
        text += " (untracked work, e.g. Python between the marked parts)"
    yield Finding("other", text, untracked)


def _exposed_comm(a: TraceAnalysis) -> Iterable[Finding]:
    if a.comm is None or a.span_us <= 0:
        return
    exposed = (a.comm.comm_us - a.comm.overlap_us) / a.span_us
    if exposed >= EXPOSED_COMM_MIN_SHARE:
        text = (
            f"communication kernels run alone {exposed:.1%} of step time"
            f" (only {a.comm.overlap_share:.0%} of their time overlaps compute)"
        )
        yield Finding("exposed_comm", text, exposed)


TRACE_RULES = (
    TraceRule("data_wait", f"waiting for data takes >= {DATA_WAIT_MIN_SHARE:.0%} of step time", _data_wait),
    TraceRule("section", f"one perfkit section takes >= {SECTION_MIN_SHARE:.0%} of step time", _sections),
    TraceRule("cpu_op", f"one CPU op takes >= {CPU_OP_MIN_SHARE:.0%} of all op self time", _cpu_op),
    TraceRule(
        "gpu_idle", f"the device is busy < {GPU_BUSY_MAX_SHARE:.0%} of step time; why it idles", _gpu_idle
    ),
    TraceRule("optimizer", f"the optimizer takes >= {OPTIMIZER_MIN_SHARE:.0%} of step time", _optimizer),
    TraceRule("other", f">= {OTHER_MIN_SHARE:.0%} of step time outside any part mark", _other),
    TraceRule(
        "exposed_comm", f"communication alone >= {EXPOSED_COMM_MIN_SHARE:.0%} of step time", _exposed_comm
    ),
)
