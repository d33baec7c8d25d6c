"""diff_traces: two traces per step, ops and device kernels alike, with a noise floor that says what it hid.

Hand-built traces (µs from 0), then two real pairs of ``../shared/traces`` against the plain reader.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pytest

from perfkit.reports import diff_text
from perfkit.trace import TimeChange, diff_traces
from perfkit.trace._parts import ALL_PARTS
from tests.trace.plain_reader import DEVICE, load_events
from tests.trace.trace_builder import kernel, mark, op, step, write_trace

SHARED = Path(__file__).resolve().parents[2] / ".." / "shared" / "traces"


def test_diff_compares_per_step_and_lists_grown_and_appeared_ops_and_sections(tmp_path: Path) -> None:
    before = write_trace(
        tmp_path / "a.json",
        [
            *(step(1, 0, 100), step(2, 100, 100), mark("perfkit.part.data_wait", 0, 20)),
            *(mark("collate", 0, 10), op("aten::mm", 30, 40), op("aten::relu", 130, 10)),
            op("aten::add", 150, 20),
        ],
        sections=["collate"],
    )
    after = write_trace(
        tmp_path / "b.json.gz",
        [
            *(step(7, 0, 300), mark("perfkit.part.data_wait", 0, 150), mark("collate", 0, 100)),
            *(op("aten::mm", 160, 60), op("aten::relu", 230, 6), op("aten::gelu", 240, 30)),
        ],
        sections=["collate"],
    )
    d = diff_traces(before, after)
    assert (d.before_steps, d.after_steps, d.before_step_us, d.after_step_us) == (2, 1, 100, 300)
    data = d.parts[0]
    assert (data.part, data.before_us, data.after_us, data.change_us) == ("data_wait", 10, 150, 140)
    assert (data.before_share, data.after_share) == (0.1, 0.5)
    assert [p.part for p in d.parts] == list(ALL_PARTS)
    assert d.noise_floor_us == 1.5  # 0.5% of the longer step
    assert d.ops.grown == (TimeChange("aten::mm", 20, 60),)
    assert d.ops.appeared == (TimeChange("aten::gelu", 0, 30),)
    assert d.ops.vanished == (TimeChange("aten::add", 10, 0),)
    assert d.ops.shrunk == ()
    assert (d.ops.hidden_count, d.ops.hidden_us) == (1, 1)  # relu: 5 -> 6 µs per step
    assert [(c.name, c.before_us, c.after_us) for c in d.grown_sections] == [("collate", 5, 100)]
    data = json.loads(json.dumps(d.to_dict(), allow_nan=False))
    assert data["ops"]["grown"][0]["change_us"] == 40
    assert data["parts"][0]["part"] == "data_wait"


def test_device_kernels_are_compared_too(tmp_path: Path) -> None:
    before = write_trace(
        tmp_path / "a.json",
        [step(1, 0, 1000), kernel("gemm", 0, 100), kernel("old", 100, 50), kernel("same", 0, 3)],
    )
    after = write_trace(
        tmp_path / "b.json",
        [step(1, 0, 1000), kernel("gemm", 0, 300), kernel("new", 300, 20), kernel("same", 0, 4)],
    )
    k = diff_traces(before, after).kernels
    assert (k.grown, k.appeared, k.vanished, k.shrunk) == (
        (TimeChange("gemm", 100, 300),),
        (TimeChange("new", 0, 20),),
        (TimeChange("old", 50, 0),),
        (),
    )
    assert (k.hidden_count, k.hidden_us) == (1, 1)  # "same" moved 1 µs, under the 5 µs floor


def test_the_text_shows_only_parts_a_side_has_and_says_what_it_hid(tmp_path: Path) -> None:
    a = write_trace(tmp_path / "a.json", [step(1, 0, 100), op("aten::mm", 0, 10), op("aten::add", 40, 1)])
    b = write_trace(tmp_path / "b.json", [step(1, 0, 200), op("aten::mm", 0, 30), op("aten::add", 40, 1.5)])
    text = diff_text(diff_traces(a, b), width=100)
    assert "Parts per step" not in text  # neither trace marks a part: "forward 0 ns -> 0 ns" says nothing
    assert "[Profiler]   10.0 µs  30.0 µs  +20.0 µs  grew    aten::mm" in text
    assert "Hidden below the noise floor of 1.0 µs per step: 1 op changes (net +500 ns per step)" in text
    marked = write_trace(tmp_path / "c.json", [step(1, 0, 100), mark("## forward ##", 0, 40)])
    parts = next(line for line in diff_text(diff_traces(a, marked)).splitlines() if "Parts per step" in line)
    assert "forward 0 ns -> 40.0 µs" in parts
    assert "other 100.0 µs -> 60.0 µs" in parts
    assert "backward" not in parts


def test_top_k_bounds_every_list(tmp_path: Path) -> None:
    a = write_trace(tmp_path / "a.json", [step(1, 0, 10_000), *(op(f"op{i}", i * 100, 10) for i in range(8))])
    b = write_trace(tmp_path / "b.json", [step(1, 0, 10_000), *(op(f"op{i}", i * 100, 90) for i in range(8))])
    d = diff_traces(a, b, top_k=3)
    assert [c.name for c in d.ops.grown] == ["op0", "op1", "op2"]


def _kernel_totals(path: Path) -> tuple[dict[str, float], int]:
    events, _ = load_events(path)
    totals: dict[str, float] = defaultdict(float)
    for e in events:
        if e.get("ph") == "X" and str(e.get("cat", "")).lower() in DEVICE:
            totals[e["name"]] += e["dur"]
    return totals, sum(1 for e in events if str(e.get("name", "")).startswith("ProfilerStep#"))


@pytest.mark.skipif(not SHARED.is_dir(), reason=f"the shared real traces are not in {SHARED}")
def test_between_two_real_ranks_the_kernel_that_grew_most_is_the_plain_readers() -> None:
    a, b = SHARED / "hta_sampled_2rank" / "rank-0.json.gz", SHARED / "hta_sampled_2rank" / "rank-1.json.gz"
    (ka, sa), (kb, sb) = _kernel_totals(a), _kernel_totals(b)
    grown = {n: kb[n] / sb - ka[n] / sa for n in ka.keys() & kb.keys()}
    top = max(grown, key=grown.__getitem__)
    d = diff_traces(a, b)
    assert d.kernels.grown[0].name == top
    assert d.kernels.grown[0].change_us == pytest.approx(grown[top])
    assert "split_embedding_backward" in top


@pytest.mark.skipif(not SHARED.is_dir(), reason=f"the shared real traces are not in {SHARED}")
def test_the_loader_op_that_num_workers_removes_is_listed_as_vanished() -> None:
    a = SHARED / "kineto_resnet50_nw0_a" / "worker0.pt.trace.json.gz"
    b = SHARED / "kineto_resnet50_nw4_a" / "worker0.pt.trace.json.gz"
    single = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"
    assert any(e.get("name") == single for e in load_events(a)[0])
    assert not any(e.get("name") == single for e in load_events(b)[0])
    d = diff_traces(a, b)
    assert single in [c.name for c in d.ops.vanished]
    assert "enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__" in [c.name for c in d.ops.appeared]
