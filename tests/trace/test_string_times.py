"""A ``ts`` or ``dur`` written as a string (some exporters do): a number is read, anything else refused.

Chrome's trace viewer reads ``"ts": "12.5"`` as 12.5, so perfkit does too; a string that is not a
number stops the analysis with one line naming the file, the field, the event and its offset, where
it used to leave the event out and exit 0.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from perfkit._cli import main
from perfkit.trace import analyze_trace, iter_trace_events
from tests.trace.trace_builder import mark, op, step, write_trace


def as_strings(event: dict[str, Any], *keys: str) -> dict[str, Any]:
    return {**event, **{k: str(event[k]) for k in keys}}


@pytest.mark.parametrize("layout", ["torch", "lines", "line"])
def test_numeric_strings_are_read_as_the_numbers_they_spell(tmp_path: Path, layout: str) -> None:
    base = 1_700_000_000_123  # an epoch in µs, as some exporters write it
    mm, add = op("aten::mm", base + 5, 12.5), op("aten::add", base + 20, 7.25)
    events = [
        as_strings(step(1, base, 40), "ts", "dur"),
        as_strings(mm, "ts", "dur"),
        as_strings(add, "dur"),
        {**mark("## forward ##", base, 30), "ts": f" {base} ", "dur": "3e1"},
    ]
    a = analyze_trace(write_trace(tmp_path / "t.json", events, layout=layout))
    assert a.skipped == ()
    assert {o.name: o.total_us for o in a.top_cpu_ops} == {"aten::mm": 12.5, "aten::add": 7.25}
    assert a.parts.forward_us == 30
    assert [s.total_us for s in a.per_step] == [40]


def test_the_reader_hands_out_numbers_of_the_type_json_would_have_given(tmp_path: Path) -> None:
    events = [{"name": "a", "ts": "1700000000123", "dur": "-0.5"}, {"name": "b", "ts": ".5", "dur": 2}]
    path = write_trace(tmp_path / "t.json", events)
    assert [(e["ts"], e["dur"]) for e in iter_trace_events(path)] == [(1700000000123, -0.5), (0.5, 2)]
    assert type(next(iter_trace_events(path))["ts"]) is int


@pytest.mark.parametrize("text", ["", "abc", "12ms", "nan", "inf", "1_000", "0x10", "\u0663", "1e"])
@pytest.mark.parametrize("key", ["ts", "dur"])
def test_a_string_that_is_not_a_number_is_refused_naming_file_field_event_and_offset(
    tmp_path: Path, key: str, text: str
) -> None:
    head = json.dumps(op("aten::add", 0, 5))
    bad = json.dumps({**op("aten::mm", 10, 5), key: text})
    path = tmp_path / "t.json"
    path.write_text('{"traceEvents": [' + head + ", " + bad + "]}")
    offset = len('{"traceEvents": [' + head + ", ")
    expected = f"{str(path)!r} is not a readable trace (event 'aten::mm' has {key} {text!r}, not a number)"
    with pytest.raises(ValueError, match="not a number") as caught:
        analyze_trace(path)
    assert str(caught.value) == f"{expected} at character {offset}"


def test_an_event_without_a_name_and_a_long_string_still_fit_one_line(tmp_path: Path) -> None:
    path = write_trace(tmp_path / "t.json", [{"ph": "X", "ts": "x" * 500}], layout="line")
    offset = path.read_text().index('{"ph"')
    message = rf"\(an event has ts 'x{{57}}\.\.\.', not a number\) at character {offset}$"
    with pytest.raises(ValueError, match=message):
        analyze_trace(path)


def test_the_cli_reads_numeric_strings_and_refuses_others_in_one_line_with_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = write_trace(tmp_path / "good.json", [as_strings(op("aten::mm", 0, 12.5), "ts", "dur")])
    assert main(["analyze", str(good), "--json"]) == 0
    ops = json.loads(capsys.readouterr().out)["top_cpu_ops"]
    assert [(o["name"], o["total_us"]) for o in ops] == [("aten::mm", 12.5)]

    bad = write_trace(tmp_path / "bad.json", [{**op("aten::mm", 0, 5), "dur": "5 us"}], layout="line")
    assert main(["analyze", str(bad)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    offset = bad.read_text().index("{", 1)
    assert err == (
        f"perfkit: error: {str(bad)!r} is not a readable trace"
        f" (event 'aten::mm' has dur '5 us', not a number) at character {offset}\n"
    )
    assert main(["diff", str(bad), str(good)]) == 2
