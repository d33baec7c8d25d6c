"""Where a step's parts come from: user annotations by their words, torch's ranges, the autograd threads.

Hand-built traces (µs from 0): every expected number follows from the construction.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from perfkit.trace import PartSource, TraceAnalysis, analyze_trace
from perfkit.trace._parts import ANNOTATION, BACKWARD, DATA_WAIT, FORWARD, OPTIMIZER, TORCH, classify
from tests.trace.trace_builder import Event, mark, op, step, write_trace

AUTOGRAD_TID = 200


def analyze(tmp_path: Path, events: list[Event]) -> TraceAnalysis:
    return analyze_trace(write_trace(tmp_path / "t.json", events))


def sources(a: TraceAnalysis) -> list[tuple[str, str, str, float]]:
    return [(s.part, s.source, s.name, s.us) for s in a.part_sources]


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("## forward ##", (FORWARD, ANNOTATION)),
        ("## forward:over_arch ##", (FORWARD, ANNOTATION)),
        ("[param|pytorch.model.alex_net|0|0|0|measure|forward]", (FORWARD, ANNOTATION)),
        ("## backward ##", (BACKWARD, ANNOTATION)),
        ("## optimizer ##", (OPTIMIZER, ANNOTATION)),
        ("## zero_grad ##", (OPTIMIZER, ANNOTATION)),
        ("## data_load ##", (DATA_WAIT, ANNOTATION)),
        ("## wait_for_batch ##", (DATA_WAIT, ANNOTATION)),
        ("## copy_batch_to_gpu 3 ##", (DATA_WAIT, ANNOTATION)),
        ("## alltoall_fwd_single ##", None),  # a word is a whole run of letters, digits and "_"
        ("## sparse_data_dist ##", None),
        ("forward_hook_stats", None),
        ("DistributedDataParallel.forward", (FORWARD, TORCH)),  # torch's own range, not the user's
        ("Optimizer.step#SGD.step", (OPTIMIZER, TORCH)),
        ("enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__", (DATA_WAIT, TORCH)),
        ("AddmmBackward0", None),  # a user annotation is never an autograd node
    ],
)
def test_a_user_annotation_marks_a_part_by_its_words(name: str, expected: tuple[int, int] | None) -> None:
    assert classify(name, annotation=True) == expected


@pytest.mark.parametrize(
    "name",
    ["AddmmBackward0", "CudnnBatchNormBackward", "torch::autograd::CopyBackwards", "autograd::engine::x"],
)
def test_an_autograd_node_run_as_an_op_is_backward(name: str) -> None:
    assert classify(name) == (BACKWARD, TORCH)


def test_the_autograd_threads_busy_time_is_backward(tmp_path: Path) -> None:
    events = [
        step(1, 0, 100),
        op("aten::linear", 5, 20),  # forward on the main thread: no mark
        op("autograd::engine::evaluate_function: MmBackward0", 40, 20, tid=AUTOGRAD_TID),
        op("aten::mm", 45, 10, tid=AUTOGRAD_TID),
        op("torch::autograd::AccumulateGrad", 70, 10, tid=AUTOGRAD_TID),
        op("aten::copy_", 0, 100, tid=300),  # a thread without backward ops is not the autograd engine
    ]
    a = analyze(tmp_path, events)
    assert (a.parts.backward_us, a.parts.other_us) == (30, 70)
    assert sources(a) == [("backward", "autograd thread", "autograd engine thread busy", 30)]


def test_older_traces_name_autograd_nodes_without_the_engine_prefix(tmp_path: Path) -> None:
    events = [step(1, 0, 100), op("CudnnConvolutionBackward", 10, 50, tid=AUTOGRAD_TID, cat="Operator")]
    assert analyze(tmp_path, events).parts.backward_us == 50


def test_the_users_marks_give_the_parts_and_say_so(tmp_path: Path) -> None:
    events = [
        step(1, 0, 100),
        mark("## data_load ##", 0, 10),
        mark("## forward ##", 10, 30),
        mark("DistributedDataParallel.forward", 12, 26),  # inside the user's forward: still the user's
        mark("## backward ##", 40, 40),
        op("autograd::engine::evaluate_function: MmBackward0", 45, 45, tid=AUTOGRAD_TID),  # 10 past the mark
        mark("## optimizer ##", 90, 8),
        mark("Optimizer.step#SGD.step", 91, 6),
    ]
    a = analyze(tmp_path, events)
    assert [a.parts.us(p) for p in ("data_wait", "forward", "backward", "optimizer", "other")] == [
        10,
        30,
        50,
        8,
        2,
    ]
    assert sources(a) == [
        ("data_wait", "user annotation", "## data_load ##", 10),
        ("forward", "user annotation", "## forward ##", 30),
        ("backward", "user annotation", "## backward ##", 40),
        ("backward", "autograd thread", "autograd engine thread busy", 10),
        ("optimizer", "user annotation", "## optimizer ##", 8),
    ]


def test_a_more_trusted_mark_inside_a_torch_range_of_the_same_part_takes_the_credit(tmp_path: Path) -> None:
    events = [
        step(1, 0, 100),
        mark("Optimizer.step#SGD.step", 0, 50),
        mark("perfkit.part.optimizer", 10, 20),
    ]
    assert sources(analyze(tmp_path, events)) == [
        ("optimizer", "torch", "Optimizer.step#SGD.step", 30),
        ("optimizer", "perfkit", "perfkit.part.optimizer", 20),
    ]


def test_perfkits_part_marks_split_the_step_and_are_not_counted_as_work(tmp_path: Path) -> None:
    spans = (("data_wait", 0, 40), ("forward", 40, 30), ("backward", 70, 20), ("optimizer", 90, 5))
    a = analyze(
        tmp_path,
        [
            step(1, 0, 100),
            *(mark(f"perfkit.part.{p}", start, dur) for p, start, dur in spans),
            op("aten::mm", 45, 10),
        ],
    )
    assert [a.parts.us(p) for p in ("data_wait", "forward", "backward", "optimizer", "other")] == [
        40,
        30,
        20,
        5,
        5,
    ]
    assert {s.source for s in a.part_sources} == {"perfkit"}
    assert [o.name for o in a.top_cpu_ops] == ["aten::mm"]  # the marks are parts, not work


def test_backward_inside_the_optimizer_closure_is_backward_also_from_the_autograd_thread(
    tmp_path: Path,
) -> None:
    events = [
        step(1, 0, 100),
        mark("Optimizer.step#SGD.step", 0, 100),  # Lightning runs forward and backward in the closure
        op("autograd::engine::evaluate_function: MmBackward0", 50, 30, tid=AUTOGRAD_TID),
    ]
    p = analyze(tmp_path, events).parts
    assert (p.backward_us, p.optimizer_us) == (30, 70)


def test_user_marks_written_as_ops_by_older_torch_count_too(tmp_path: Path) -> None:
    events = [step(1, 0, 100), op("## forward ##", 0, 60, cat="Operator")]
    assert analyze(tmp_path, events).parts.forward_us == 60


def test_the_other_time_says_which_annotations_it_lies_in(tmp_path: Path) -> None:
    events = [
        step(1, 0, 100),
        mark("## forward ##", 0, 20),
        mark("## sparse_data_dist ##", 20, 60),
        mark("## sparse_data_dist ##", 30, 10),  # nested in itself: counted once
        mark("## metrics ##", 85, 15),
        mark("## wait inside forward ##", 5, 10),  # covered by forward: not other
    ]
    a = analyze(tmp_path, events)
    assert a.parts.other_us == 80
    assert [s for s in a.part_sources if s.part == "other"] == [
        PartSource("other", "annotation", "## sparse_data_dist ##", 60, 0.6),
        PartSource("other", "annotation", "## metrics ##", 15, 0.15),
    ]
    finding = next(f for f in a.findings if f.kind == "UNMARKED_TIME")
    assert finding.message == (
        "80.0% of step time is outside any part mark, 60.0% of step time inside '## sparse_data_dist ##'"
    )


def test_without_a_forward_mark_the_finding_says_torch_marks_none(tmp_path: Path) -> None:
    events = [step(1, 0, 100), mark("Optimizer.step#SGD.step", 80, 20)]
    finding = next(f for f in analyze(tmp_path, events).findings if f.kind == "UNMARKED_TIME")
    assert (
        "torch marks no forward pass: a record_function('## forward ##') range around it would"
        in finding.message
    )


def test_a_step_fully_marked_has_no_other_finding(tmp_path: Path) -> None:
    events = [step(1, 0, 100), mark("## forward ##", 0, 50), mark("## backward ##", 50, 50)]
    assert not any(f.kind == "UNMARKED_TIME" for f in analyze(tmp_path, events).findings)


def test_an_annotation_holding_little_of_the_other_time_is_not_named_in_the_finding(
    tmp_path: Path,
) -> None:
    events = [step(1, 0, 100), mark("## forward ##", 0, 20), mark("## small ##", 30, 10)]
    a = analyze(tmp_path, events)
    assert sources(a)[-1] == ("other", "annotation", "## small ##", 10)
    finding = next(f for f in a.findings if f.kind == "UNMARKED_TIME")
    assert finding.message == (
        "80.0% of step time is outside any part mark (untracked work, e.g. Python between the marked parts)"
    )
