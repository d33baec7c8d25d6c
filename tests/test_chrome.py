"""write_chrome_trace: retained records as Chrome trace events, one row per thread."""

from __future__ import annotations

import gzip
import json
import threading
from pathlib import Path
from typing import Any

import pytest

import perfkit
from perfkit import Registry

from .conftest import FakeClock


def load(path: Path) -> dict[str, Any]:
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt") as fh:
        data: dict[str, Any] = json.load(fh)
    return data


def test_nested_sections_become_nested_complete_events(
    tmp_path: Path, reg: Registry, clock: FakeClock
) -> None:
    with perfkit.section("epoch", registry=reg):
        clock.advance(1_000)
        with perfkit.section("batch", registry=reg):
            clock.advance(2_000)
    trace = load(perfkit.write_chrome_trace(tmp_path / "t.json", reg))
    spans = {e["name"]: e for e in trace["traceEvents"] if e["ph"] == "X"}
    epoch, batch = spans["epoch"], spans["batch"]
    assert (epoch["dur"], batch["dur"]) == (3.0, 2.0)  # microseconds
    assert epoch["ts"] <= batch["ts"]
    assert batch["ts"] + batch["dur"] <= epoch["ts"] + epoch["dur"]
    assert epoch["tid"] == batch["tid"]


def test_one_row_per_thread_with_names(tmp_path: Path, reg: Registry) -> None:
    def work() -> None:
        with perfkit.section("bg", registry=reg):
            pass

    t = threading.Thread(target=work, name="prefetcher")
    t.start()
    t.join()
    with perfkit.section("fg", registry=reg):
        pass
    trace = load(perfkit.write_chrome_trace(tmp_path / "t.json", reg.snapshot()))
    names = {e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "thread_name"}
    assert names == {"prefetcher", "MainThread"}
    tids = {e["name"]: e["tid"] for e in trace["traceEvents"] if e["ph"] == "X"}
    rows = {e["args"]["name"]: e["tid"] for e in trace["traceEvents"] if e["name"] == "thread_name"}
    assert tids["bg"] == rows["prefetcher"]
    assert tids["fg"] == rows["MainThread"]


def test_gzip_when_the_path_says_so_and_errors_are_flagged(tmp_path: Path, reg: Registry) -> None:
    with pytest.raises(ValueError, match="bad input"), perfkit.section("bad", registry=reg):
        raise ValueError("bad input")
    trace = load(perfkit.write_chrome_trace(tmp_path / "t.json.gz", reg))
    (event,) = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert event["args"] == {"error": True}


def test_rejects_other_sources(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="source must be a perfkit.Snapshot or Registry"):
        perfkit.write_chrome_trace(tmp_path / "t.json", [])  # type: ignore[arg-type]
