"""iter_trace_events: a Chrome trace read one event at a time, whatever its layout or compression."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from perfkit.trace._events import iter_trace_events
from tests.trace.trace_builder import mark, memory, op, write_trace

EVENTS = [
    op("aten::linear", 0.125, 30.5),
    op("aten::addmm", 5, 10),
    mark('name with "quotes", [brackets] and {braces}', 40, 1e-3),
    memory(41, 1024),
    {"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "args": {"name": "thread 1 (python)"}},
]


def read(path: Path, **kwargs: Any) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    metadata: dict[str, Any] = {}
    return list(iter_trace_events(path, metadata, **kwargs)), metadata


@pytest.mark.parametrize("layout", ["torch", "lines", "line"])
@pytest.mark.parametrize("name", ["t.json", "t.json.gz"])
def test_every_layout_gives_the_events_and_the_other_top_level_keys(
    tmp_path: Path, layout: str, name: str
) -> None:
    path = write_trace(tmp_path / name, EVENTS, layout=layout, sections=["collate"], baseTimeNanoseconds=7)
    events, metadata = read(path)
    assert events == EVENTS
    assert metadata == {
        "schemaVersion": 1,
        "deviceProperties": [],
        "perfkit": {"sections": ["collate"]},
        "baseTimeNanoseconds": 7,
        "traceName": "trace.json",  # written after the events, read all the same
    }


def test_gzip_is_recognised_by_content_not_by_name(tmp_path: Path) -> None:
    path = tmp_path / "compressed.json"
    path.write_bytes(gzip.compress(json.dumps({"traceEvents": EVENTS}).encode()))
    assert read(path)[0] == EVENTS


def test_the_json_array_form_is_read_even_without_its_closing_bracket(tmp_path: Path) -> None:
    path = tmp_path / "array.json"
    path.write_text(json.dumps(EVENTS)[:-1] + ",\n")
    assert read(path)[0] == EVENTS


def test_a_real_torch_trace_reads_like_json_load() -> None:
    path = Path(__file__).parents[1] / "data" / "traces" / "torch_cpu_marked.pt.trace.json.gz"
    with gzip.open(path, "rt") as fh:
        whole = json.load(fh)
    events, metadata = read(path, chunk_chars=4096)
    assert events == whole.pop("traceEvents")
    assert metadata == whole


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    events=st.lists(st.dictionaries(st.text(max_size=6), _json, max_size=4), max_size=6),
    layout=st.sampled_from(["torch", "lines", "line"]),
    chunk_chars=st.integers(min_value=1, max_value=64),
)
def test_any_chunk_size_cuts_the_text_anywhere_without_changing_what_is_read(
    tmp_path: Path, events: list[dict[str, Any]], layout: str, chunk_chars: int
) -> None:
    path = write_trace(tmp_path / "t.json", events, layout=layout, otherData={"n": 12345.678e-3})
    got, metadata = read(path, chunk_chars=chunk_chars)
    assert got == events
    assert metadata["otherData"] == {"n": 12345.678e-3}


def test_a_missing_file_is_named_at_once(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"not found: '.*nope\.json'"):
        iter_trace_events(tmp_path / "nope.json")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "cut short"),
        (b"hello", "not a Chrome trace"),
        (b'{"displayTimeUnit": "ms"}', "no 'traceEvents' array"),
        (b'{"traceEvents": [{"ph": "X"}, {"ph": ', "not valid JSON"),
        (b'{"traceEvents": [{"ph": "X"}', "cut short"),
        (b'{"traceEvents": [{"ph": "X"}, nope]}', "not valid JSON"),
        (b"\x1f\x8bnot really gzip", "cannot read trace file"),
    ],
)
def test_what_is_not_a_trace_raises_value_error_naming_the_file(
    tmp_path: Path, content: bytes, message: str
) -> None:
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    with pytest.raises(ValueError, match=message) as info:
        read(path, chunk_chars=8)
    assert "bad.json" in str(info.value)


def test_chunk_chars_must_be_positive(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="chunk_chars must be an int >= 1, got 0"):
        iter_trace_events(write_trace(tmp_path / "t.json", []), chunk_chars=0)


def test_a_corrupt_event_is_reported_at_its_position_in_the_file(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    good = json.dumps(op("aten::mm", 0, 1))
    path.write_text('{"traceEvents": [' + good + ', {"ph": nope}' + (", " + good) * 10_000 + "]}")
    where = len('{"traceEvents": [' + good + ', {"ph": ')
    with pytest.raises(ValueError, match=f"not valid JSON \\(Expecting value\\) at character {where}$"):
        read(path, chunk_chars=256)
