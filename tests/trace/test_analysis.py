"""analyze_trace / diff_traces: what a torch profiler trace says about where the steps went.

Traces are built by hand (times in µs), so every expected number follows from the construction;
two small real torch 2.13 traces (see data/traces/make_real_traces.py) are checked for robust facts.
"""

from __future__ import annotations

import json
import time
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from perfkit._formats import ANALYSIS_FORMAT, FormatError
from perfkit.reports import analysis_text
from perfkit.trace._analysis import analyze_trace
from perfkit.trace._parts import BACKWARD, DATA_WAIT, FORWARD, LIGHTNING, OPTIMIZER, classify
from perfkit.trace._parts import PERFKIT as PERFKIT_SOURCE
from perfkit.trace._parts import TORCH as TORCH_SOURCE
from perfkit.trace._results import PartSplit, TraceAnalysis
from perfkit.trace._rules import CPU_OP_MIN_SHARE, DATA_WAIT_MIN_SHARE
from tests.trace.trace_builder import Event, kernel, mark, memory, op, step, write_trace

TRACES = Path(__file__).parents[1] / "data" / "traces"
MARKED = TRACES / "torch_cpu_marked.pt.trace.json.gz"
PLAIN = TRACES / "torch_cpu_plain.pt.trace.json.gz"
LIGHTNING_TRACE = TRACES / "lightning_cpu.pt.trace.json.gz"


def trace(
    tmp_path: Path, events: list[Event], name: str = "t.json", sections: list[str] | None = None, **top: Any
) -> Path:
    return write_trace(tmp_path / name, events, sections=sections, **top)


def shares(split: PartSplit) -> dict[str, float]:
    return {p: round(s, 6) for p, s in split.shares.items()}


# --- CPU ops ---------------------------------------------------------------------------------


def test_an_op_self_time_is_its_duration_minus_the_ops_nested_in_it(tmp_path: Path) -> None:
    events = [op("aten::linear", 0, 30), op("aten::addmm", 5, 10), op("aten::addmm", 40, 10)]
    ops = {o.name: o for o in analyze_trace(trace(tmp_path, events)).top_cpu_ops}
    assert (ops["aten::linear"].self_us, ops["aten::linear"].total_us, ops["aten::linear"].count) == (
        20,
        30,
        1,
    )
    assert (ops["aten::addmm"].self_us, ops["aten::addmm"].count) == (20, 2)
    assert ops["aten::linear"].share == ops["aten::addmm"].share == 0.5


def test_steps_and_annotations_do_not_break_the_op_tree(tmp_path: Path) -> None:
    # Lightning steps the profiler inside Optimizer.step, so a step can cut through an op.
    events = [
        step(1, 0, 12),
        op("aten::linear", 5, 30),
        mark("perfkit.part.forward", 6, 20),
        mark("my range", 7, 40),  # not even nested cleanly
        op("aten::addmm", 8, 10),
    ]
    ops = {o.name: o.self_us for o in analyze_trace(trace(tmp_path, events)).top_cpu_ops}
    assert ops == {"aten::linear": 20, "aten::addmm": 10}


def test_ops_only_nest_within_their_own_thread(tmp_path: Path) -> None:
    events = [op("aten::linear", 0, 30, tid=1), op("aten::addmm", 5, 10, tid=2)]
    ops = {o.name: o.self_us for o in analyze_trace(trace(tmp_path, events)).top_cpu_ops}
    assert ops == {"aten::linear": 30, "aten::addmm": 10}


def test_top_k_keeps_the_ops_with_most_self_time(tmp_path: Path) -> None:
    events = [op(f"aten::op{i}", 100 * i, i + 1) for i in range(5)]
    top = analyze_trace(trace(tmp_path, events), top_k=2).top_cpu_ops
    assert [o.name for o in top] == ["aten::op4", "aten::op3"]
    assert top[0].share == 5 / 15


@pytest.mark.parametrize("top_k", [0, -1, 1.5, True])
def test_top_k_must_be_a_positive_int(tmp_path: Path, top_k: object) -> None:
    with pytest.raises(ValueError, match=f"top_k must be an int >= 1, got {top_k!r}"):
        analyze_trace(trace(tmp_path, []), top_k=top_k)  # type: ignore[arg-type]


# --- parts -----------------------------------------------------------------------------------


def test_data_loading_covering_62_percent_of_the_step_is_a_finding(tmp_path: Path) -> None:
    events = [
        step(1, 0, 100),
        mark("perfkit.part.data_wait", 0, 62),
        mark("perfkit.part.forward", 62, 20),
        mark("perfkit.part.backward", 82, 10),
        mark("perfkit.part.optimizer", 92, 5),
    ]
    a = analyze_trace(trace(tmp_path, events))
    assert shares(a.parts) == {
        "data_wait": 0.62,
        "forward": 0.2,
        "backward": 0.1,
        "optimizer": 0.05,
        "other": 0.03,
    }
    assert (a.parts.data_wait_us, a.parts.other_us, a.span_us, a.step_count) == (62, 3, 100, 1)
    assert a.findings[0].kind == "INPUT_BOUND"
    assert a.findings[0].share == pytest.approx(0.62)
    assert a.findings[0].text == (
        "data loader waits take 62.0% of step time: more workers or a cheaper collate would help"
    )


def test_backward_inside_the_optimizer_closure_counts_as_backward(tmp_path: Path) -> None:
    events = [
        step(1, 0, 100),
        mark("Optimizer.step#SGD.step", 10, 80),
        mark("perfkit.part.forward", 20, 20),  # Lightning runs the closure inside optimizer.step
        op("autograd::engine::evaluate_function: AddmmBackward0", 50, 30),
        op("aten::mm", 55, 10),  # inside the backward op: still backward
    ]
    p = analyze_trace(trace(tmp_path, events)).parts
    assert (p.forward_us, p.backward_us, p.optimizer_us, p.other_us) == (20, 30, 30, 20)


def test_without_a_forward_mark_the_forward_in_the_closure_counts_as_optimizer(tmp_path: Path) -> None:
    events = [step(1, 0, 100), mark("Optimizer.step#SGD.step", 0, 100), op("aten::linear", 20, 20)]
    assert analyze_trace(trace(tmp_path, events)).parts.optimizer_us == 100


def test_a_perfkit_mark_wins_over_a_torch_mark_with_the_same_bounds(tmp_path: Path) -> None:
    events = [
        step(1, 0, 100),
        mark("perfkit.part.forward", 10, 50),
        mark("Optimizer.step#SGD.step", 10, 50),
    ]
    assert analyze_trace(trace(tmp_path, events)).parts.forward_us == 50


def test_each_step_gets_its_own_split_and_the_total_adds_them(tmp_path: Path) -> None:
    events = [
        step(3, 0, 100),
        mark("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", 0, 10),
        step(4, 100, 50),
        mark("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", 100, 40),
        mark("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", 200, 40),  # after the steps
    ]
    a = analyze_trace(trace(tmp_path, events))
    assert [(s.label, s.total_us, s.data_wait_us) for s in a.per_step] == [
        ("ProfilerStep#3", 100, 10),
        ("ProfilerStep#4", 50, 40),
    ]
    assert (a.parts.total_us, a.parts.data_wait_us, a.step_count) == (150, 50, 2)


def test_a_mark_spanning_two_steps_is_split_between_them(tmp_path: Path) -> None:
    events = [step(1, 0, 100), step(2, 100, 100), mark("perfkit.part.backward", 80, 40)]
    assert [s.backward_us for s in analyze_trace(trace(tmp_path, events)).per_step] == [20, 20]


def test_without_steps_the_window_is_the_span_of_the_main_thread(tmp_path: Path) -> None:
    events = [op("aten::linear", 10, 30), mark("perfkit.part.optimizer", 60, 50)]
    a = analyze_trace(trace(tmp_path, events))
    assert (a.step_count, a.span_us, a.parts.optimizer_us) == (0, 100, 50)
    assert [s.label for s in a.per_step] == ["whole trace"]


def test_without_steps_the_main_thread_is_the_one_whose_ranges_span_longest(tmp_path: Path) -> None:
    events = [op("aten::linear", 10, 30), mark("perfkit.part.optimizer", 60, 50)]
    a = analyze_trace(trace(tmp_path, [*events, op("aten::copy_", 0, 500, tid=9)]))
    assert (a.span_us, a.parts.optimizer_us) == (500, 0)


def test_shares_add_up_to_one_even_with_overlapping_marks(tmp_path: Path) -> None:
    events = [
        step(1, 0, 100),
        mark("perfkit.part.data_wait", -50, 80),  # starts before the step
        mark("perfkit.part.forward", 20, 50),  # overlaps without nesting
        mark("perfkit.part.backward", 60, 100),  # ends after the step
        mark("perfkit.part.optimizer", 65, 2),
    ]
    p = analyze_trace(trace(tmp_path, events)).parts
    assert sum(p.shares.values()) == pytest.approx(1)
    assert p.other_us >= 0
    assert (p.data_wait_us, p.forward_us, p.backward_us, p.optimizer_us) == (20, 40, 38, 2)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("perfkit.part.data_wait", (DATA_WAIT, PERFKIT_SOURCE)),
        ("perfkit.part.optimizer", (OPTIMIZER, PERFKIT_SOURCE)),
        ("[pl][profile][_TrainingEpochLoop].train_dataloader_next", (DATA_WAIT, LIGHTNING)),
        ("[pl][profile][_EvaluationLoop].val_next", (DATA_WAIT, LIGHTNING)),
        ("[pl][profile][Strategy]SingleDeviceStrategy.training_step", (FORWARD, LIGHTNING)),
        ("[pl][profile][Strategy]SingleDeviceStrategy.validation_step", (FORWARD, LIGHTNING)),
        ("[pl][module]torch.nn.modules.linear.Linear: net.0", (FORWARD, LIGHTNING)),
        ("[pl][profile][Strategy]SingleDeviceStrategy.backward", (BACKWARD, LIGHTNING)),
        ("[pl][profile][LightningModule]M.optimizer_step", (OPTIMIZER, LIGHTNING)),
        ("[pl][profile]optimizer_step", (OPTIMIZER, LIGHTNING)),
        ("[pl][profile][LightningModule]M.on_before_backward", None),
        ("[pl][profile][LightningModule]M.on_before_optimizer_step", None),
        ("[pl][profile]run_training_batch", None),
        ("enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__", (DATA_WAIT, TORCH_SOURCE)),
        ("autograd::engine::evaluate_function: AddmmBackward0", (BACKWARD, TORCH_SOURCE)),
        ("Optimizer.step#AdamW.step", (OPTIMIZER, TORCH_SOURCE)),
        ("Optimizer.zero_grad#AdamW.zero_grad", (OPTIMIZER, TORCH_SOURCE)),
        ("aten::linear", None),
        ("perfkit.part.something_else", None),
    ],
)
def test_part_marks_are_recognised_by_name(name: str, expected: tuple[int, int] | None) -> None:
    assert classify(name) == expected


# --- sections, memory, GPU -------------------------------------------------------------------


def test_sections_named_in_the_perfkit_metadata_are_reported_within_the_steps(tmp_path: Path) -> None:
    events = [
        step(1, 0, 100),
        step(2, 100, 100),
        mark("collate", 10, 50),
        mark("collate", 190, 20),  # half outside the steps
        op("unclip", 120, 30),  # a section recorded with the cheap cpu_op-category range
        op("aten::stack", 125, 10),
        mark("other", 0, 100),  # not a section
    ]
    a = analyze_trace(trace(tmp_path, events, sections=["collate", "unclip", "absent"]))
    assert [(s.name, s.count, s.total_us, s.share) for s in a.sections] == [
        ("collate", 2, 60, 0.3),
        ("unclip", 1, 30, 0.15),
        ("absent", 0, 0, 0),
    ]
    assert {o.name: o.self_us for o in a.top_cpu_ops} == {"aten::stack": 10}  # a section is not an op


def test_sections_written_with_add_metadata_as_a_json_string_are_read_too(tmp_path: Path) -> None:
    events = [step(1, 0, 100), mark("collate", 0, 75)]
    path = trace(tmp_path, events, perfkit=json.dumps({"sections": ["collate"]}))
    a = analyze_trace(path)
    assert [(s.name, s.share) for s in a.sections] == [("collate", 0.75)]
    section = next(f for f in a.findings if f.kind == "SLOW_SECTION")
    assert (section.message, section.share) == ("section 'collate' takes 75.0% of step time", 0.75)


def test_without_perfkit_metadata_there_are_no_sections(tmp_path: Path) -> None:
    assert analyze_trace(trace(tmp_path, [step(1, 0, 100), mark("collate", 0, 75)])).sections == ()


def test_memory_peaks_are_the_highest_totals_per_device(tmp_path: Path) -> None:
    events = [
        memory(1, 1000),
        memory(2, 3000),
        memory(3, 500),
        memory(4, 2_000_000, 4_000_000, device_type=1, device_id=0),
        memory(5, 1_000_000, 4_200_000, device_type=1, device_id=0),
    ]
    a = analyze_trace(trace(tmp_path, events))
    assert [(m.device, m.allocated_bytes, m.reserved_bytes) for m in a.memory] == [
        ("cpu", 3000, 0),
        ("cuda:0", 2_000_000, 4_200_000),
    ]
    assert analyze_trace(trace(tmp_path, [op("aten::mm", 0, 1)])).memory == ()


def test_older_traces_give_only_bytes_and_the_peak_is_their_running_sum_per_device(tmp_path: Path) -> None:
    def delta(ts: float, size: int, device_type: int = 1) -> Event:
        event = memory(ts, 0, device_type=device_type, device_id=0)
        return event | {"args": {"Bytes": size, "Device Type": device_type, "Device Id": 0}}

    events = [
        delta(3, -120),
        delta(1, 100),
        delta(4, 200),
        delta(2, 50),
        delta(5, -230),
    ]  # file order != time
    events += [memory(1, 7000, 9000, device_type=1, device_id=1), delta(1, 10, device_type=0)]
    a = analyze_trace(trace(tmp_path, events))
    assert [(m.device, m.allocated_bytes, m.reserved_bytes, m.source) for m in a.memory] == [
        ("cpu", 10, 0, "Bytes running sum"),
        ("cuda:0", 230, 0, "Bytes running sum"),  # 100, 150, 30, 230, 0
        ("cuda:1", 7000, 9000, "Total Allocated"),
    ]
    assert "cuda:0 230 B allocated (running sum of Bytes)" in analysis_text(a)


def test_device_activities_are_ranked_and_busy_time_is_the_union_of_all_of_them(tmp_path: Path) -> None:
    events = [
        step(1, 0, 100),
        kernel("gemm", 10, 20),
        kernel("gemm", 20, 20, stream=8),  # overlaps the first on another stream: busy 10..40
        kernel("relu", 60, 5),
        kernel("Memcpy HtoD (Pinned -> Device)", 90, 15, cat="gpu_memcpy"),  # busy 90..100 inside the step
    ]
    a = analyze_trace(trace(tmp_path, events))
    assert [(k.name, k.kind, k.count, k.total_us, k.share) for k in a.top_cuda_kernels] == [
        ("gemm", "kernel", 2, 40, 40 / 60),
        ("Memcpy HtoD (Pinned -> Device)", "memcpy", 1, 15, 15 / 60),
        ("relu", "kernel", 1, 5, 5 / 60),
    ]
    assert (a.gpu_busy_share, a.kernel_busy_share) == (pytest.approx(0.45), pytest.approx(0.35))
    idle = next(f for f in a.findings if f.kind == "GPU_IDLE")
    assert idle.share == pytest.approx(0.55)
    assert "busy 45.0%" in idle.message


def test_a_cpu_trace_has_no_kernels_and_no_busy_share(tmp_path: Path) -> None:
    a = analyze_trace(trace(tmp_path, [step(1, 0, 10), op("aten::mm", 0, 5)]))
    assert (a.top_cuda_kernels, a.gpu_busy_share) == ((), None)


# --- findings and output ---------------------------------------------------------------------


def test_findings_come_sorted_by_size_with_their_numbers(tmp_path: Path) -> None:
    events = [
        step(1, 0, 100),
        mark("Optimizer.step#SGD.step", 0, 35),
        op("aten::_foreach_add_", 0, 30),
        op("aten::mm", 40, 5),
    ]
    a = analyze_trace(trace(tmp_path, events))
    assert [(f.kind, round(f.share, 3)) for f in a.findings] == [
        ("SLOW_OP", round(30 / 35, 3)),
        ("UNMARKED_TIME", 0.65),
        ("OPTIMIZER_BOUND", 0.35),
    ]
    assert (
        a.findings[0].message == "aten::_foreach_add_ takes 85.7% of CPU op self time (30.0 µs over 1 call)"
    )


def test_a_balanced_trace_has_no_findings(tmp_path: Path) -> None:
    events = [
        step(1, 0, 100),
        mark("perfkit.part.data_wait", 0, DATA_WAIT_MIN_SHARE * 100 - 1),
        mark("perfkit.part.forward", 30, 40),
        mark("perfkit.part.backward", 70, 30),
        *(op(f"aten::op{i}", 30 + 10 * i, 10) for i in range(7)),
    ]
    a = analyze_trace(trace(tmp_path, events))
    assert a.top_cpu_ops[0].share < CPU_OP_MIN_SHARE
    assert a.findings == ()
    assert analysis_text(a).endswith("[Profiler] Bottlenecks: none found")


def test_the_text_report_has_one_profiler_line_per_topic(tmp_path: Path) -> None:
    events = [
        step(1, 0, 2000),
        step(2, 2000, 2000),
        mark("perfkit.part.data_wait", 0, 400),
        mark("perfkit.part.forward", 400, 1600),
        op("aten::addmm", 500, 1000),
        op("aten::relu", 1600, 250),
        mark("collate", 100, 200),
        memory(10, 12_300_000),
    ]
    a = analyze_trace(trace(tmp_path, events, sections=["collate"]))
    assert analysis_text(a, trace_path="x.json", width=100).splitlines() == [
        "[Profiler] Trace: x.json (8 events, 2 steps, 4.00 ms)",
        "[Profiler] Summary: data wait 10.0%, forward 40.0%, backward 0.0%, optimizer 0.0%, other 50.0%",
        "[Profiler] Parts from (share of step time; other: inside annotations that mark no part):",
        "[Profiler]   share  part       source   mark",
        "[Profiler]   10.0%  data wait  perfkit  perfkit.part.data_wait",
        "[Profiler]   40.0%  forward    perfkit  perfkit.part.forward",
        "[Profiler] Top 2 CPU ops by self time (share of all op self time):",
        "[Profiler]   self time  share     total  calls  op",
        "[Profiler]     1.00 ms  80.0%   1.00 ms      1  aten::addmm",
        "[Profiler]    250.0 µs  20.0%  250.0 µs      1  aten::relu",
        "[Profiler] Top 1 annotations by time inside the steps:",
        "[Profiler]       time  share  ranges  kind  annotation",
        "[Profiler]   200.0 µs   5.0%       1  cpu   collate",
        "[Profiler] Memory peaks: cpu 12.3 MB allocated",
        "[Profiler] Sections: collate 5.0%",
        "[Profiler] Bottlenecks:",
        "[Profiler]   - aten::addmm takes 80.0% of CPU op self time (1.00 ms over 1 call)",
        "[Profiler]   - 50.0% of step time is outside any part mark (untracked work, e.g. Python between the",
        "[Profiler]     marked parts)",
    ]


def test_to_dict_is_plain_json_with_shares(tmp_path: Path) -> None:
    events = [step(1, 0, 100), mark("perfkit.part.forward", 0, 25), kernel("k", 0, 10), memory(1, 5)]
    d = json.loads(json.dumps(analyze_trace(trace(tmp_path, events, sections=["s"])).to_dict()))
    assert d["parts"]["shares"]["forward"] == 0.25
    assert d["per_step"][0]["label"] == "ProfilerStep#1"
    assert d["top_cuda_kernels"][0]["name"] == "k"
    assert set(d) == {
        "format",
        "path",
        "event_count",
        "step_count",
        "span_us",
        "top_cpu_ops",
        "top_cuda_kernels",
        "gpu_busy_share",
        "memory",
        "parts",
        "per_step",
        "sections",
        "findings",
        "kernel_busy_share",
        "unlaunched_device_us",
        "idle",
        "transfers",
        "comm",
        "part_sources",
        "annotations",
        "skipped",
        "rank",
    }


def test_from_dict_reads_to_dict_back_and_names_what_is_malformed(tmp_path: Path) -> None:
    events = [
        step(1, 0, 100),
        mark("## forward ##", 0, 25),
        kernel("k", 0, 10),
        memory(1, 5),
        op("aten::mm", 0, 5),
    ]
    a = analyze_trace(trace(tmp_path, events, sections=["s"]))
    data = json.loads(json.dumps(a.to_dict()))
    assert data["format"] == ANALYSIS_FORMAT
    assert TraceAnalysis.from_dict(data) == a
    with pytest.raises(ValueError, match="not a perfkit trace analysis"):
        TraceAnalysis.from_dict({**data, "idle": [{"stream": "x"}]})
    with pytest.raises(ValueError, match="not a perfkit trace analysis: KeyError.'part_sources'"):
        TraceAnalysis.from_dict({k: v for k, v in data.items() if k != "part_sources"})


def test_from_dict_refuses_an_analysis_of_another_format_in_one_line(tmp_path: Path) -> None:
    data = analyze_trace(trace(tmp_path, [step(1, 0, 100)])).to_dict()
    with pytest.raises(FormatError) as refused:
        TraceAnalysis.from_dict({**data, "format": ANALYSIS_FORMAT + 1})
    assert str(refused.value) == (
        f"the trace analysis is format {ANALYSIS_FORMAT + 1}; this perfkit reads format {ANALYSIS_FORMAT} "
        "(a newer perfkit wrote it: upgrade perfkit)"
    )
    with pytest.raises(ValueError, match=r"no format number \(format='1'\)"):  # a string is no number
        TraceAnalysis.from_dict({**data, "format": "1"})
    unnumbered = {k: v for k, v in data.items() if k != "format"}  # as written before analyses had one
    assert TraceAnalysis.from_dict(unnumbered) == TraceAnalysis.from_dict(data)


# --- real torch traces -----------------------------------------------------------------------


def test_a_real_torch_trace_with_perfkit_marks_gives_sane_numbers() -> None:
    a = analyze_trace(MARKED)
    assert a.step_count == 3
    assert "aten::addmm" in [o.name for o in a.top_cpu_ops[:3]]
    assert sum(o.share for o in analyze_trace(MARKED, top_k=1000).top_cpu_ops) == pytest.approx(1)
    assert sum(a.parts.shares.values()) == pytest.approx(1)
    assert all(a.parts.share(p) > 0.02 for p in ("data_wait", "forward", "backward", "optimizer"))
    assert [s.name for s in a.sections] == ["collate"]
    assert 0 < a.sections[0].share < a.parts.share("data_wait")  # collate runs inside the fetch
    assert [m.device for m in a.memory] == ["cpu"]
    assert a.top_cuda_kernels == ()


def test_a_real_torch_trace_without_our_marks_falls_back_to_torch_names() -> None:
    a = analyze_trace(PLAIN)
    assert a.parts.forward_us == 0  # torch marks no forward pass
    assert all(a.parts.share(p) > 0.02 for p in ("data_wait", "backward", "optimizer"))
    assert a.sections == ()


def test_a_real_lightning_profiler_trace_gets_its_parts_from_lightning_names() -> None:
    a = analyze_trace(LIGHTNING_TRACE)
    assert a.step_count == 3
    assert all(a.parts.us(p) > 0 for p in ("data_wait", "forward", "backward", "optimizer"))
    assert sum(a.parts.shares.values()) == pytest.approx(1)


# --- streaming -------------------------------------------------------------------------------

_EVENT = (
    '  {{\n    "ph": "X", "cat": "{}", "name": "{}", "pid": 7, "tid": 7,\n'
    '    "ts": {:.3f}, "dur": {:.3f},\n    "args": {{\n'
    '      "External id": {}, "Record function id": 0, "Ev Idx": 0\n    }}\n  }}'
)


def _synthetic_trace(path: Path, size: int) -> int:
    """A trace in torch's layout of about ``size`` bytes: 100 µs steps of 34 ranges; returns steps."""
    steps = 0
    with path.open("w") as fh:
        fh.write('{\n  "schemaVersion": 1,\n  "perfkit": {"sections": ["collate"]},\n  "traceEvents": [\n')
        sep = ""
        while fh.tell() < size:
            t = 100.0 * steps
            rows = [
                ("user_annotation", f"ProfilerStep#{steps}", t, 100.0),
                ("user_annotation", "perfkit.part.data_wait", t, 30.0),
                ("user_annotation", "collate", t + 5, 20.0),
                ("user_annotation", "perfkit.part.forward", t + 30, 40.0),
            ]
            rows += [("cpu_op", "aten::linear", t + 30 + 4 * k, 4.0) for k in range(10)]
            rows += [("cpu_op", "aten::addmm", t + 31 + 4 * k, 2.0) for k in range(10)]
            rows += [("cpu_op", "autograd::engine::evaluate_function: MmBackward0", t + 70, 20.0)]
            rows += [("cpu_op", "aten::mm", t + 70 + 2 * k, 1.0) for k in range(9)]
            for i, (cat, name, ts, dur) in enumerate(rows):
                fh.write(sep + _EVENT.format(cat, name, ts, dur, i))
                sep = ",\n"
            steps += 1
        fh.write('\n  ],\n  "traceName": "big.json"\n}\n')
    return steps


@pytest.mark.slow
def test_a_20_mb_trace_is_analysed_in_a_fraction_of_its_size_in_memory(tmp_path: Path) -> None:
    path = tmp_path / "big.pt.trace.json"
    steps = _synthetic_trace(path, 20 << 20)
    size = path.stat().st_size
    tracemalloc.start()
    try:
        started = time.perf_counter()
        a = analyze_trace(path)
        elapsed = time.perf_counter() - started
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 0.5 * size, f"peak {peak:,} B for a {size:,} B trace"
    assert elapsed < 30
    assert (a.step_count, a.event_count) == (steps, 34 * steps)
    assert shares(a.parts)["data_wait"] == 0.3
    assert a.sections[0].share == pytest.approx(0.2)


@pytest.mark.parametrize(
    ("op_name", "advice"),
    [
        ("aten::add_", "a fused or foreach optimizer may help"),
        ("aten::_foreach_mul_", "already runs batched ops"),
    ],
)
def test_the_optimizer_finding_advises_batching_only_where_the_trace_has_none(
    tmp_path: Path, op_name: str, advice: str
) -> None:
    events = [step(1, 0, 100), mark("perfkit.part.optimizer", 40, 50), op(op_name, 45, 40)]
    (finding,) = [f for f in analyze_trace(trace(tmp_path, events)).findings if f.kind == "OPTIMIZER_BOUND"]
    assert advice in finding.action
