"""Each trace rule on a hand-built analysis: it fires with the share planted, stays silent just
below its threshold, and abstains naming the input the trace lacks. No trace is read: every test
starts from a trace of one second of steps in which nothing crosses a threshold, and changes the
one number its rule reads."""

from __future__ import annotations

import inspect
import sys
from dataclasses import replace
from typing import Any

import pytest

from perfkit.findings import Abstention, Verdict
from perfkit.trace import (
    ALL_PARTS,
    TRACE_KINDS,
    TRACE_RULES,
    CommOverlap,
    OpStat,
    PartSplit,
    SectionStat,
    StreamIdle,
    TraceAnalysis,
    find_bottlenecks,
)

SPAN_US = 1_000_000.0  # one second of profiled steps: a share is the planted seconds themselves


def parts(total_us: float = SPAN_US, **shares: float) -> PartSplit:
    """The steps' split with the given parts' shares; the forward pass has the rest."""
    us = {f"{p}_us": shares.get(p, 0.0) * total_us for p in ALL_PARTS}
    us["forward_us"] = total_us - sum(us.values())
    return PartSplit.from_dict({"label": "all", "total_us": total_us, **us})


def op(name: str, share: float) -> OpStat:
    return OpStat(name, 100, share * SPAN_US, share * SPAN_US, share)


QUIET = TraceAnalysis(
    path="quiet.pt.trace.json",
    event_count=1000,
    step_count=10,
    span_us=SPAN_US,
    top_cpu_ops=(op("aten::mm", 0.20), op("aten::add", 0.10)),
    top_cuda_kernels=(),
    gpu_busy_share=0.90,
    memory=(),
    parts=parts(data_wait=0.05, backward=0.40, optimizer=0.05, other=0.10),
    per_step=(),
    sections=(SectionStat("forward", 10, 0.20 * SPAN_US, 0.20),),
    findings=(),
    comm=CommOverlap(100_000.0, 800_000.0, 100_000.0, 1.0),
)
"""A trace with every input a rule reads, none over its threshold."""

NO_STEP_TIME = replace(QUIET, step_count=0, span_us=0.0, parts=parts(0.0), gpu_busy_share=None, comm=None)
"""What a trace with no step and no main-thread span comes to."""


def trace(**changes: Any) -> TraceAnalysis:
    return replace(QUIET, **changes)


def judged(kind: str, analysis: TraceAnalysis) -> list[Verdict | Abstention]:
    """What the rule of ``kind`` in ``TRACE_RULES`` concludes: the path ``find_bottlenecks`` takes."""
    [rule] = [r for r in TRACE_RULES if r.kind == kind]
    return rule.apply(analysis)


def fires(kind: str, analysis: TraceAnalysis) -> Verdict:
    [outcome] = judged(kind, analysis)
    assert isinstance(outcome, Verdict), outcome
    assert (outcome.kind, outcome.stage, outcome.epoch) == (kind, "", -1)
    return outcome


def abstains(kind: str, analysis: TraceAnalysis) -> str:
    [outcome] = judged(kind, analysis)
    assert isinstance(outcome, Abstention), outcome
    assert (outcome.rule, outcome.stage, outcome.epoch) == (kind, "", -1)
    return outcome.missing


def test_the_quiet_trace_gives_every_rule_its_input_and_crosses_no_threshold() -> None:
    assert [(r.kind, r.apply(QUIET)) for r in TRACE_RULES] == [(k, []) for k in TRACE_KINDS]


def test_find_bottlenecks_keeps_the_findings_and_leaves_the_abstentions_out() -> None:
    assert find_bottlenecks(NO_STEP_TIME) == ()
    assert [v.kind for v in find_bottlenecks(trace(parts=parts(data_wait=0.35)))] == ["INPUT_BOUND"]


# ---- INPUT_BOUND --------------------------------------------------------------------------------------


def test_input_bound_fires_with_the_data_wait_share_of_the_steps() -> None:
    v = fires("INPUT_BOUND", trace(parts=parts(data_wait=0.35)))
    assert v.share == pytest.approx(0.35)
    assert "35.0% of step time" in v.message


def test_input_bound_is_silent_below_three_tenths() -> None:
    assert judged("INPUT_BOUND", trace(parts=parts(data_wait=0.29))) == []


def test_input_bound_abstains_without_step_time() -> None:
    assert "step time" in abstains("INPUT_BOUND", NO_STEP_TIME)


# ---- SLOW_SECTION -------------------------------------------------------------------------------------


def test_slow_section_fires_with_the_sections_share_of_the_steps() -> None:
    v = fires("SLOW_SECTION", trace(sections=(SectionStat("forward", 10, 0.60 * SPAN_US, 0.60),)))
    assert (v.share, v.subject) == (pytest.approx(0.60), "forward")


def test_slow_section_is_silent_below_half_the_steps() -> None:
    assert judged("SLOW_SECTION", trace(sections=(SectionStat("forward", 10, 0.49 * SPAN_US, 0.49),))) == []


def test_slow_section_abstains_when_the_trace_names_no_perfkit_section() -> None:
    assert "perfkit sections" in abstains("SLOW_SECTION", trace(sections=()))


# ---- SLOW_OP ---------------------------------------------------------------------------------------------


def test_slow_op_fires_with_the_ops_share_of_the_ops_self_time() -> None:
    v = fires("SLOW_OP", trace(top_cpu_ops=(op("aten::conv2d", 0.45), op("aten::mm", 0.20))))
    assert (v.share, v.subject) == (pytest.approx(0.45), "aten::conv2d")


def test_slow_op_is_silent_below_two_fifths() -> None:
    assert judged("SLOW_OP", trace(top_cpu_ops=(op("aten::conv2d", 0.39),))) == []


def test_slow_op_abstains_without_cpu_ops() -> None:
    assert "CPU ops" in abstains("SLOW_OP", trace(top_cpu_ops=()))


# ---- GPU_IDLE --------------------------------------------------------------------------------------------


def test_gpu_idle_fires_with_the_idle_share_and_says_what_the_device_waits_for() -> None:
    idle = StreamIdle("all streams", 0.40 * SPAN_US, 0.45 * SPAN_US, 0.05 * SPAN_US, 0.10 * SPAN_US)
    v = fires("GPU_IDLE", trace(gpu_busy_share=0.40, idle=(idle,)))
    assert v.share == pytest.approx(1 - 0.40)
    assert "it waits for the CPU" in v.message  # 0.45 of its 0.60 idle is waiting for a launch


def test_gpu_idle_is_silent_from_half_the_steps_busy() -> None:
    assert judged("GPU_IDLE", trace(gpu_busy_share=0.50)) == []


def test_gpu_idle_abstains_without_device_activity() -> None:
    assert "device activity" in abstains("GPU_IDLE", trace(gpu_busy_share=None, comm=None))


# ---- OPTIMIZER_BOUND ---------------------------------------------------------------------------------


def test_optimizer_bound_fires_with_the_optimizer_share_of_the_steps() -> None:
    v = fires("OPTIMIZER_BOUND", trace(parts=parts(optimizer=0.35)))
    assert v.share == pytest.approx(0.35)
    assert "fused or foreach" in v.action  # its ops are not batched yet


def test_optimizer_bound_is_silent_below_three_tenths() -> None:
    assert judged("OPTIMIZER_BOUND", trace(parts=parts(optimizer=0.29))) == []


def test_optimizer_bound_abstains_without_step_time() -> None:
    assert "step time" in abstains("OPTIMIZER_BOUND", NO_STEP_TIME)


# ---- UNMARKED_TIME ---------------------------------------------------------------------------------------


def test_unmarked_time_fires_with_the_other_share_of_the_steps() -> None:
    v = fires("UNMARKED_TIME", trace(parts=parts(other=0.45)))
    assert v.share == pytest.approx(0.45)
    assert "torch marks no forward pass" in v.message  # no part source marks one


def test_unmarked_time_is_silent_below_two_fifths() -> None:
    assert judged("UNMARKED_TIME", trace(parts=parts(other=0.39))) == []


def test_unmarked_time_abstains_without_step_time() -> None:
    assert "step time" in abstains("UNMARKED_TIME", NO_STEP_TIME)


# ---- EXPOSED_COMM ----------------------------------------------------------------------------------------


def test_exposed_comm_fires_with_the_communication_no_compute_overlaps() -> None:
    comm = CommOverlap(300_000.0, 600_000.0, 50_000.0, 50_000.0 / 300_000.0)
    v = fires("EXPOSED_COMM", trace(comm=comm))
    assert v.share == pytest.approx((300_000 - 50_000) / SPAN_US)


def test_exposed_comm_is_silent_below_a_fifth() -> None:
    comm = CommOverlap(300_000.0, 600_000.0, 101_000.0, 101_000.0 / 300_000.0)
    assert judged("EXPOSED_COMM", trace(comm=comm)) == []  # 199 ms alone in 1 s


def test_exposed_comm_abstains_without_communication_kernels() -> None:
    assert "communication kernels" in abstains("EXPOSED_COMM", trace(comm=None))


# ---- every rule ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", TRACE_KINDS)
def test_every_trace_rule_is_specified_here(kind: str) -> None:
    """A new trace rule needs its three tests: it fires, it is silent below its threshold, it abstains."""
    tests = [n for n, _ in inspect.getmembers(sys.modules[__name__], inspect.isfunction)]
    prefix = f"test_{kind.lower()}_"
    for behaviour in ("fires", "is_silent", "abstains"):
        assert any(n.startswith(prefix + behaviour) for n in tests), (kind, behaviour)
