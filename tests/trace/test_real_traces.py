"""perfkit analyze on 23 real Kineto traces written by other projects, against an independent plain reader.

Each number perfkit gives is compared with the one ``plain_reader`` computes from the raw events
(``json.load``, interval unions, per-thread walks): device busy, backward and forward against the
trace's own ``## backward ##`` / ``## forward ##`` marks or the autograd threads' busy time, what no
part mark covers, memory peaks, op self times, idle gaps, communication overlap. The traces live
in ``../shared/traces`` (see its README); the module is skipped without them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from perfkit.trace import TraceAnalysis, analyze_trace
from perfkit.trace._rules import GPU_BUSY_MAX_SHARE, HOST_WAIT_MIN_SHARE, OTHER_MIN_SHARE
from tests.trace.plain_reader import Facts, read_facts

TRACES = Path(__file__).resolve().parents[2] / ".." / "shared" / "traces"
FILES = sorted(TRACES.glob("*/*.json.gz")) if TRACES.is_dir() else []
pytestmark = pytest.mark.skipif(
    len(FILES) < 23, reason=f"the 23 shared real traces are not in {TRACES} (see the README there)"
)
POINTS = 100.0  # shares compared in percentage points


@dataclass
class Case:
    path: Path
    facts: Facts
    analysis: TraceAnalysis

    def share(self, us: float) -> float:
        return POINTS * us / self.facts.step_us


def _name(path: Path) -> str:
    return path.parent.name + (
        "/" + path.name.split(".")[0] if len(list(path.parent.glob("*.gz"))) > 1 else ""
    )


@pytest.fixture(scope="module", params=FILES or [None], ids=[_name(p) for p in FILES] or ["absent"])
def case(request: pytest.FixtureRequest) -> Case:
    path: Path = request.param
    return Case(path, read_facts(path), analyze_trace(path, top_k=5))


def test_there_are_the_23_traces_of_the_readme() -> None:
    assert len(FILES) == 23


def test_steps_and_rank_are_the_traces_own(case: Case) -> None:
    assert case.analysis.step_count == case.facts.steps
    assert case.analysis.span_us == pytest.approx(case.facts.step_us)
    assert case.analysis.rank == case.facts.rank
    assert case.analysis.skipped == ()


def test_device_busy_is_the_union_of_all_device_activity_over_the_steps(case: Case) -> None:
    a = case.analysis
    if case.facts.step_us == 0 or a.gpu_busy_share is None:
        assert case.facts.device_busy == 0
        return
    assert POINTS * a.gpu_busy_share == pytest.approx(case.share(case.facts.device_busy), abs=1.5)
    assert POINTS * (a.kernel_busy_share or 0) == pytest.approx(case.share(case.facts.kernel_busy), abs=1.5)


def test_backward_is_the_backward_mark_or_else_the_autograd_threads_busy_time(case: Case) -> None:
    f = case.facts
    expected = f.backward_mark if f.backward_mark is not None else f.autograd_cover
    assert POINTS * case.analysis.parts.share("backward") == pytest.approx(case.share(expected), abs=10)
    if f.autograd_threads and f.autograd_cover > 0:
        assert any(s.source == "autograd thread" for s in case.analysis.part_sources) or f.backward_mark


def test_forward_is_the_forward_mark_where_the_trace_has_one(case: Case) -> None:
    if case.facts.forward_mark is None:
        pytest.skip("no '## forward ##' in this trace")
    assert POINTS * case.analysis.parts.share("forward") == pytest.approx(
        case.share(case.facts.forward_mark), abs=10
    )
    assert any(s.part == "forward" and s.name == "## forward ##" for s in case.analysis.part_sources)


def test_other_is_the_step_time_no_part_mark_covers(case: Case) -> None:
    p = case.analysis.parts
    assert sum(p.shares.values()) == pytest.approx(1)
    uncovered = POINTS - case.share(case.facts.part_cover)
    assert POINTS * p.share("other") == pytest.approx(uncovered, abs=1.5)


def test_the_outside_any_part_mark_finding_fires_only_where_it_is_true(case: Case) -> None:
    uncovered = 1 - case.facts.part_cover / case.facts.step_us
    if abs(uncovered - OTHER_MIN_SHARE) < 0.01:
        pytest.skip("too close to the threshold to tell")
    fired = any(f.kind == "UNMARKED_TIME" for f in case.analysis.findings)
    assert fired == (uncovered > OTHER_MIN_SHARE)


def test_the_gpu_waits_for_the_cpu_only_where_host_wait_dominates_its_idle_time(case: Case) -> None:
    idle = case.facts.idle
    said = [f.message for f in case.analysis.findings if "waits for the CPU" in f.message]
    if not idle or sum(idle.values()) == 0:
        assert not said
        return
    busy = case.facts.device_busy / case.facts.step_us
    assert bool(said) == (
        idle["host_wait"] / sum(idle.values()) >= HOST_WAIT_MIN_SHARE and busy < GPU_BUSY_MAX_SHARE
    )


def test_device_idle_gaps_split_as_hta_does(case: Case) -> None:
    if not case.facts.idle:
        assert case.analysis.idle == ()
        return
    device = case.analysis.idle[0]
    assert device.stream == "all streams"
    for key, us in case.facts.idle.items():
        assert getattr(device, f"{key}_us") == pytest.approx(us, abs=1.0)


def test_communication_overlap_is_the_intersection_of_comm_and_compute_kernels(case: Case) -> None:
    c = case.analysis.comm
    if case.facts.comm is None:
        assert c is None
        return
    assert c is not None
    comm, compute, overlap = case.facts.comm
    assert (c.comm_us, c.compute_us, c.overlap_us) == pytest.approx((comm, compute, overlap), abs=1.0)


def test_memory_peaks_come_from_total_allocated_or_the_running_sum_of_bytes(case: Case) -> None:
    peaks = {m.device: m.allocated_bytes for m in case.analysis.memory}
    assert peaks.keys() == case.facts.memory.keys()
    for device, expected in case.facts.memory.items():
        assert peaks[device] == pytest.approx(expected, abs=1)
    if case.facts.memory:
        assert max(peaks.values()) > 0


def test_the_top_op_and_its_self_time_match_a_per_thread_walk(case: Case) -> None:
    name, self_us = case.facts.top_op
    top = case.analysis.top_cpu_ops[0]
    assert (top.name, top.self_us) == (name, pytest.approx(self_us, abs=10.0))  # 0.01 ms


def test_every_table_holds_at_most_top_k_rows(case: Case) -> None:
    a = case.analysis
    for rows in (a.top_cpu_ops, a.top_cuda_kernels, a.transfers, a.annotations):
        assert len(rows) <= 5
    assert len(a.idle) <= 6  # the device as a whole, then top_k streams
