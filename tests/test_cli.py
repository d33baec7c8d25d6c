"""The ``perfkit`` command line: ``analyze`` and ``diff`` print text or JSON; bad input exits 2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from perfkit._cli import main
from tests.trace.trace_builder import kernel, mark, op, step, write_trace

REAL = Path(__file__).parent / "data" / "traces" / "torch_cpu_marked.pt.trace.json.gz"


@pytest.fixture
def small(tmp_path: Path) -> Path:
    events = [
        step(1, 0, 100),
        mark("perfkit.part.data_wait", 0, 62),
        op("aten::addmm", 70, 20),
        op("aten::relu", 90, 5),
    ]
    return write_trace(tmp_path / "small.pt.trace.json.gz", events)


def test_analyze_prints_the_profiler_lines(
    small: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "100")
    assert main(["analyze", str(small)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"[Profiler] Trace: {small} (4 events, 1 step, 100.0 µs)"
    assert lines[1].startswith("[Profiler] Summary: data wait 62.0%")
    assert "[Profiler]     20.0 µs  80.0%  20.0 µs      1  aten::addmm" in lines
    assert "[Profiler] Bottlenecks:" in lines
    assert (
        "[Profiler]   - data loader waits take 62.0% of step time: more workers or a cheaper collate would"
        in lines
    )
    assert all(len(line) <= 100 for line in lines[1:])


def test_analyze_json_is_the_analysis_as_a_dict(small: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["analyze", str(small), "--json", "--top-k", "1"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [o["name"] for o in data["top_cpu_ops"]] == ["aten::addmm"]
    assert data["parts"]["shares"]["data_wait"] == 0.62


@pytest.mark.parametrize("value", ["0", "-3", "two"])
def test_top_k_below_one_is_refused_naming_the_value(
    small: Path, capsys: pytest.CaptureFixture[str], value: str
) -> None:
    assert main(["analyze", str(small), "--top-k", value]) == 2
    err = capsys.readouterr().err
    assert f"argument --top-k: must be an integer >= 1, got {value!r}" in err


def test_a_missing_trace_is_one_line_on_stderr_and_exit_code_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["analyze", str(tmp_path / "nope.json")]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith("perfkit: error: trace file not found:")
    assert "nope.json" in err
    assert "Traceback" not in err


def test_a_file_that_is_not_a_trace_exits_2_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "notes.json"
    bad.write_text('{"hello": "world"}')
    assert main(["diff", str(bad), str(bad)]) == 2
    assert "notes.json' has no 'traceEvents' array" in capsys.readouterr().err


def test_no_command_prints_usage_and_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    assert "usage: perfkit" in capsys.readouterr().err


def test_help_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    assert "analyze" in capsys.readouterr().out


def test_diff_prints_a_comparison_per_step(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = write_trace(tmp_path / "a.json", [step(1, 0, 100), op("aten::mm", 0, 10), kernel("gemm", 0, 10)])
    b = write_trace(tmp_path / "b.json", [step(1, 0, 200), op("aten::mm", 0, 30), op("aten::gelu", 50, 5)])
    assert main(["diff", str(a), str(b)]) == 0
    out = capsys.readouterr().out
    assert f"[Profiler] Diff: {a} (1 step) -> {b} (1 step): 100.0 µs -> 200.0 µs per step (+100.0%)" in out
    assert "10.0 µs  30.0 µs  +20.0 µs  grew      aten::mm" in out
    assert "10.0 µs      -  -10.0 µs  vanished  gemm" in out
    assert main(["diff", str(a), str(b), "--json", "--top-k", "1"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [c["name"] for c in data["ops"]["appeared"]] == ["aten::gelu"]
    assert [c["name"] for c in data["kernels"]["vanished"]] == ["gemm"]


def test_analyze_a_directory_of_ranks_prints_one_row_per_rank_and_the_straggler(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for rank, backward in ((0, 50), (1, 80)):
        events = [step(1, 0, 100), mark("## backward ##", 0, backward), kernel("gemm", 0, backward)]
        events.append(kernel("ncclKernel_AllReduce", backward, 100 - backward, stream=20))
        write_trace(tmp_path / f"rank{rank}.json", events, distributedInfo={"rank": rank})
    assert main(["analyze", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"[Profiler] Ranks: {tmp_path} (2 traces)")
    assert "[Profiler] Straggler: rank 1, 80.0 µs of work per step" in out
    assert main(["analyze", str(tmp_path), "--json", "--top-k", "1"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert (data["straggler"]["rank"], [len(r["top_cuda_kernels"]) for r in data["ranks"]]) == (1, [1, 1])


def test_python_dash_m_perfkit_runs_the_same_command_line() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "perfkit", "analyze", str(REAL), "--top-k", "3"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=Path(__file__).parents[1],
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"[Profiler] Trace: {REAL} (")
    assert "[Profiler] Top 3 CPU ops by self time (share of all op self time):" in done.stdout
