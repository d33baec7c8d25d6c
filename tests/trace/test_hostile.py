"""Hostile traces (issue 14, item 8): never a traceback; what cannot be read is counted, or refused in a line.

A malformed *event* (a ``ts`` of ``true``, NaN, a 400-digit number) is skipped and counted by reason;
a file that is not readable JSON, or has a ``ts`` or ``dur`` string that is not a number (see
test_string_times), raises ``ValueError`` naming the file and the character offset, and
``perfkit analyze`` prints that one line on stderr and exits 2.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from perfkit._cli import main
from perfkit.reports import analysis_text
from perfkit.trace import analyze_trace, diff_traces
from tests.trace.trace_builder import kernel, mark, memory, op, step, write_trace

DEPTH = 50_000


def skipped(path: Path) -> dict[str, int]:
    return {s.reason: s.count for s in analyze_trace(path).skipped}


def test_a_400_digit_ts_is_skipped_and_counted(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_text(
        '{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a", "ts": 1' + "0" * 400 + ', "dur": 1}]}'
    )
    a = analyze_trace(path)
    assert [(s.reason, s.count) for s in a.skipped] == [("ts out of range", 1)]
    assert a.top_cpu_ops == ()


def test_a_profiler_step_with_20_digits_is_a_step_like_any_other(tmp_path: Path) -> None:
    n = 10**19 + 7  # past int64
    a = analyze_trace(write_trace(tmp_path / "t.json", [step(n, 0, 100), mark("## forward ##", 0, 40)]))
    assert (a.step_count, [s.label for s in a.per_step]) == (1, [f"ProfilerStep#{n}"])
    assert a.parts.forward_us == 40


def test_50k_nested_ops_and_marks_need_no_recursion(tmp_path: Path) -> None:
    ops = [op(f"aten::op{i % 7}", i, 2 * (DEPTH - i)) for i in range(DEPTH)]
    marks = [mark("## forward ##" if i % 2 else "## backward ##", i, 2 * (DEPTH - i)) for i in range(DEPTH)]
    a = analyze_trace(write_trace(tmp_path / "t.json", [step(1, 0, 2 * DEPTH), *ops, *marks], layout="lines"))
    assert sum(o.self_us for o in analyze_trace(tmp_path / "t.json", top_k=10).top_cpu_ops) == 2 * DEPTH
    assert a.parts.forward_us + a.parts.backward_us == 2 * DEPTH


def test_json_nested_50k_deep_is_a_value_error_naming_file_and_offset(tmp_path: Path) -> None:
    path = tmp_path / "deep.json"
    path.write_text('{"traceEvents": [{"ph": "X", "args": ' + "[" * DEPTH + "]" * DEPTH + "}]}")
    with pytest.raises(ValueError, match=r"deep\.json' is nested too deeply to decode at character 17$"):
        analyze_trace(path)


def test_a_number_past_pythons_digit_limit_is_a_value_error_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "long.json"
    path.write_text('{"traceEvents": [{"ph": "X", "ts": ' + "9" * 5000 + "}]}")
    with pytest.raises(
        ValueError, match=r"long\.json' is not readable \(Exceeds the limit .* at character 17$"
    ):
        analyze_trace(path)


def test_wrong_type_nan_and_infinite_times_are_counted_by_reason_not_silently_dropped(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    good = op("aten::mm", 0, 10)
    bad = [{**good, "ts": True}, {**good, "ts": [12]}, {**good, "ts": math.nan}, {**good, "dur": math.inf}]
    bad += [{**good, "dur": -1}, {**good, "name": 5}, [1, 2], {**memory(1, 5), "args": {"Bytes": math.nan}}]
    path.write_text(json.dumps({"traceEvents": [good, *bad]}))  # json.dumps writes NaN and Infinity
    assert skipped(path) == {
        "ts not a number": 2,
        "ts not finite": 1,
        "dur not finite": 1,
        "dur negative": 1,
        "cat or name not a string": 1,
        "not a JSON object": 1,
        "[memory] without a usable Bytes or Total Allocated": 1,
    }
    a = analyze_trace(path)
    assert [o.name for o in a.top_cpu_ops] == ["aten::mm"]
    assert "[Profiler] Skipped: 2 events: ts not a number; 1 event: ts not finite;" in analysis_text(a)


def test_nan_and_infinity_never_reach_the_results(tmp_path: Path) -> None:
    events = [
        step(1, 0, 100),
        kernel("k", 0, 10),
        {**kernel("m", 20, 5, cat="gpu_memcpy"), "args": {"bytes": math.inf}},
    ]
    events += [{**memory(1, 5), "args": {"Total Allocated": math.inf, "Bytes": 8, "Device Type": 0}}]
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events}))
    data = json.loads(json.dumps(analyze_trace(path).to_dict(), allow_nan=False))  # raises on NaN or inf
    assert data["memory"] == [
        {"device": "cpu", "allocated_bytes": 8, "reserved_bytes": 0, "source": "Bytes running sum"}
    ]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"traceEvents": [' + "[" * DEPTH, "nested too deeply to decode at character 17"),
        ('{"traceEvents": [{"ts": ' + "1" * 5000 + "}]}", "not readable (Exceeds the limit"),
        ('{"traceEvents": [{"ts": nope}]}', "not valid JSON (Expecting value) at character 24"),
    ],
)
def test_the_cli_says_it_in_one_line_and_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, message: str
) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content)
    assert main(["analyze", str(path)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith(f"perfkit: error: {str(path)!r} is ")
    assert message in err
    assert err.count("\n") == 1
    assert main(["diff", str(path), str(path)]) == 2


def test_a_path_that_is_not_a_path_names_the_parameter() -> None:
    with pytest.raises(TypeError, match="path must be a str or os.PathLike, got None"):
        analyze_trace(None)  # type: ignore[arg-type]


_number = st.one_of(
    st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=3),
    st.none(),
    st.booleans(),
)
_event = st.fixed_dictionaries(
    {
        "ph": st.sampled_from(["X", "i", "I", "M", "B"]),
        "cat": st.one_of(
            st.sampled_from(["cpu_op", "user_annotation", "kernel", "gpu_memcpy", "cuda_runtime"]), _number
        ),
        "name": st.one_of(
            st.sampled_from(["ProfilerStep#1", "## forward ##", "[memory]", "aten::mm", "nccl"]), _number
        ),
        "ts": _number,
        "dur": _number,
        "pid": _number,
        "tid": _number,
    },
    optional={
        "args": st.one_of(
            st.dictionaries(
                st.sampled_from(
                    ["correlation", "bytes", "Bytes", "Total Allocated", "Device Type", "Device Id"]
                ),
                _number,
            ),
            _number,
        )
    },
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(events=st.lists(st.one_of(_event, _number), max_size=12))
def test_any_mix_of_wrong_types_and_values_is_analysed_or_refused_with_a_value_error(
    tmp_path: Path, events: list[Any]
) -> None:
    path = tmp_path / "fuzz.json"
    path.write_text(json.dumps({"traceEvents": events}))
    strings = [e for e in events if isinstance(e, dict) and str in {type(e["ts"]), type(e["dur"])}]
    try:
        a = analyze_trace(path, top_k=3)
    except ValueError as exc:  # only for a ts or dur string that is not a number
        refused = str(exc)
    else:
        refused = ""
    if refused:
        assert strings
        assert refused.endswith(f", not a number) at character {refused.split()[-1]}")
        return
    json.dumps(a.to_dict(), allow_nan=False)
    assert analysis_text(a, width=60)
    assert diff_traces(path, path).ops.grown == ()
    assert sum(s.count for s in a.skipped) <= len(events)


def test_recursion_limit_is_not_what_lets_50k_levels_through() -> None:
    assert sys.getrecursionlimit() < DEPTH
