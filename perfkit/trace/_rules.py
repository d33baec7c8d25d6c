"""Bottleneck findings of a trace: each a small rule with a threshold, said in words with its number.

``TRACE_RULES`` is the list a trace's analysis is walked through; adding a finding is adding a
rule. They have the shape of a run's rules (``perfkit._rule.Rule``) and conclude the same
``Verdict``: its ``share`` is the fraction of the profiled step time that crossed the threshold
(for the GPU, the idle share), so sorting by share puts the biggest problem first; its
``stage`` is empty, as a trace is judged on its own. A rule whose input the trace lacks (no
step time, no device activity, no communication) abstains, naming it; ``find_bottlenecks``
keeps the findings only.

    >>> [rule.kind for rule in TRACE_RULES][:3]
    ['INPUT_BOUND', 'SLOW_SECTION', 'SLOW_OP']
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from .._display import display_name
from .._rule import Abstention, Rule, Verdict, kinds, verdict
from .._units import format_us, plural

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


def find_bottlenecks(analysis: TraceAnalysis) -> tuple[Verdict, ...]:
    """The findings of every rule in ``TRACE_RULES`` for ``analysis``, largest share first; often none."""
    found = [v for rule in TRACE_RULES for v in rule.apply(analysis) if isinstance(v, Verdict)]
    return tuple(sorted(found, key=lambda v: -v.share))


def _abstain(missing: str) -> Abstention:
    """This trace cannot be judged without ``missing`` (its rule names itself)."""
    return Abstention("", "", -1, missing)


NO_STEP_TIME = "profiled step time (the trace has no step and no main-thread span)"


def _data_wait(a: TraceAnalysis) -> Iterable[Verdict | Abstention]:
    if a.span_us <= 0:
        yield _abstain(NO_STEP_TIME)
        return
    data = a.parts.share("data_wait")
    if data >= DATA_WAIT_MIN_SHARE:
        text = f"data loader waits take {data:.1%} of step time"
        yield verdict(data, text, "more workers or a cheaper collate would help")


def _sections(a: TraceAnalysis) -> Iterable[Verdict | Abstention]:
    if not a.sections:
        yield _abstain(
            "perfkit sections (the trace names none: no section was timed, or perfkit did not take it)"
        )
        return
    for s in a.sections:
        if s.share >= SECTION_MIN_SHARE:
            text = f"section '{display_name(s.name)}' takes {s.share:.1%} of step time"
            yield verdict(s.share, text, subject=s.name)


def _cpu_op(a: TraceAnalysis) -> Iterable[Verdict | Abstention]:
    if not a.top_cpu_ops:
        yield _abstain("CPU ops (the trace has none)")
        return
    if a.top_cpu_ops[0].share >= CPU_OP_MIN_SHARE:
        op = a.top_cpu_ops[0]
        text = (
            f"{display_name(op.name)} takes {op.share:.1%} of CPU op self time"
            f" ({format_us(op.self_us)} over {plural(op.count, 'call')})"
        )
        yield verdict(op.share, text, subject=op.name)


def _gpu_idle(a: TraceAnalysis) -> Iterable[Verdict | Abstention]:
    busy = a.gpu_busy_share
    if busy is None:
        yield _abstain("device activity in the steps (the trace has none: a CPU run, or no step time)")
        return
    if busy >= GPU_BUSY_MAX_SHARE:
        return
    text = f"the GPU is idle {1 - busy:.1%} of the profiled time (busy {busy:.1%})"
    device = a.idle[0] if a.idle else None
    if device is None or device.idle_us <= 0:
        yield verdict(1 - busy, text)
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
    yield verdict(1 - busy, text)


def _optimizer(a: TraceAnalysis) -> Iterable[Verdict | Abstention]:
    if a.span_us <= 0:
        yield _abstain(NO_STEP_TIME)
        return
    optimizer = a.parts.share("optimizer")
    if optimizer >= OPTIMIZER_MIN_SHARE:
        ops = (op.name for op in a.top_cpu_ops if "_foreach_" in op.name or "_fused_" in op.name)
        batched = next(ops, None)
        if batched is None:
            advice = "a fused or foreach optimizer may help"
        else:  # already batched: do not advise what the trace shows it does
            advice = (
                f"it already runs batched ops ({display_name(batched)}): stepping less often is what is left"
            )
        yield verdict(optimizer, f"the optimizer step takes {optimizer:.1%} of step time", advice)


def _other(a: TraceAnalysis) -> Iterable[Verdict | Abstention]:
    if a.span_us <= 0:
        yield _abstain(NO_STEP_TIME)
        return
    untracked = a.parts.share("other")
    if untracked < OTHER_MIN_SHARE:
        return
    text = f"{untracked:.1%} of step time is outside any part mark"
    # Name the annotation holding the other time only when it holds a good part of it.
    inside = [s for s in a.part_sources if s.part == "other" and s.share >= untracked * NAMED_MIN_PART]
    if inside:
        text += f", {inside[0].share:.1%} of step time inside '{display_name(inside[0].name)}'"
    if not any(s.part == "forward" for s in a.part_sources):
        text += " (torch marks no forward pass: a record_function('## forward ##') range around it would)"
    elif not inside:
        text += " (untracked work, e.g. Python between the marked parts)"
    yield verdict(untracked, text)


def _exposed_comm(a: TraceAnalysis) -> Iterable[Verdict | Abstention]:
    if a.comm is None or a.span_us <= 0:
        yield _abstain("communication kernels in the steps (the trace has none: one device, or a CPU run)")
        return
    exposed = (a.comm.comm_us - a.comm.overlap_us) / a.span_us
    if exposed >= EXPOSED_COMM_MIN_SHARE:
        text = (
            f"communication kernels run alone {exposed:.1%} of step time"
            f" (only {a.comm.overlap_share:.0%} of their time overlaps compute)"
        )
        yield verdict(exposed, text)


TRACE_RULES: tuple[Rule[TraceAnalysis], ...] = (
    Rule("INPUT_BOUND", ("data_wait",), DATA_WAIT_MIN_SHARE,
         "a third of the step spent waiting for batches is the first thing to fix", _data_wait),
    Rule("SLOW_SECTION", ("sections",), SECTION_MIN_SHARE,
         "one timed block holding half the step is where the time is", _sections),
    Rule("SLOW_OP", ("cpu ops",), CPU_OP_MIN_SHARE,
         "one op holding two fifths of the ops' self time is worth replacing or batching", _cpu_op),
    Rule("GPU_IDLE", ("device activity",), GPU_BUSY_MAX_SHARE,
         "a device busy less than half the step is waiting for something: say what", _gpu_idle),
    Rule("OPTIMIZER_BOUND", ("optimizer",), OPTIMIZER_MIN_SHARE,
         "an optimizer step near a third of the step is past a normal update's cost", _optimizer),
    Rule("UNMARKED_TIME", ("other",), OTHER_MIN_SHARE,
         "when two fifths of the step has no part mark, the split says little: name what holds it", _other),
    Rule("EXPOSED_COMM", ("communication kernels",), EXPOSED_COMM_MIN_SHARE,
         "communication that overlaps no compute for a fifth of the step is lost time on every rank",
         _exposed_comm),
)  # fmt: skip

TRACE_KINDS = kinds(TRACE_RULES)
"""Every kind a trace's findings carry: declared once, by its rule above."""
