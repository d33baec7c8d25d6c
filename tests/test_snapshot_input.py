"""Malformed snapshots are one documented error, never a raw exception (issue 14, item 7).

``Snapshot.from_dict`` / ``from_json`` raise ``ValueError`` naming the field and the value
for anything that is not a snapshot perfkit wrote, and check its invariants: counts >= 0,
columns of one length, indexes in range.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

import perfkit
from perfkit import Snapshot
from perfkit._snapshot import NodeTotals
from perfkit._stats import SeriesData
from tests.conftest import FakeClock


@pytest.fixture
def good(reg: perfkit.Registry, clock: FakeClock) -> dict[str, Any]:
    for _ in range(3):
        with perfkit.section("step", registry=reg):
            clock.advance(1_000)
    reg.gauge("process.rss_mb", 10.0)
    return reg.snapshot().to_dict()


def broken(good: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    data = copy.deepcopy(good)
    *parents, last = path.split("/")
    target = data
    for p in parents:
        target = target[int(p)] if isinstance(target, list) else target[p]
    if value is KeyError:
        del target[last]
    else:
        target[last] = value
    return data


def test_a_good_snapshot_still_reads_back_equal(good: dict[str, Any]) -> None:
    snap = Snapshot.from_json(json.dumps(good))
    assert snap.to_dict() == good


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[]", "snapshot: the document must be a JSON object, got \\[\\]"),
        ("{not json", "snapshot: not JSON"),
        ("[" * 100_000 + "]" * 100_000, "snapshot: not JSON"),  # RecursionError in json
        ('{"format": 1, "series": 5}', "snapshot: series must be a JSON object, got 5"),
        ("null", "snapshot: the document must be a JSON object, got None"),
    ],
)
def test_text_that_is_not_a_snapshot_is_a_value_error(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Snapshot.from_json(text)


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        ("series/step/count", 0, r"series\['step'\].count must be >= 1"),
        ("series/step/count", -3, r"series\['step'\].count must be an int >= 0, got -3"),
        pytest.param(
            "series/step/count",
            10**400,
            r"series\['step'\].count must be an int >= 0, got 1000000",
            id="huge",
        ),
        ("series/step/total_ns", "12", r"series\['step'\].total_ns must be an int >= 0, got '12'"),
        ("series/step/m2", float("nan"), r"series\['step'\].m2 must be a finite number, got nan"),
        ("series/step/durations_ns", [1, 2], r"series\['step'\] columns must have one length"),
        ("series/step/starts_ns", [1.5, 2, 3], r"series\['step'\].starts_ns must be a list of ints"),
        ("series/step/durations_ns", [2**64, 1, 1], r"series\['step'\].durations_ns must be a list of ints"),
        ("series/step/threads", [0, 0, 7], r"series\['step'\].threads must index threads"),
        ("series/step/error_samples", [9], r"series\['step'\].error_samples must index the samples"),
        ("series/step/errors", 99, r"series\['step'\].count must be >= 1 and >= errors \(99\), got 3"),
        ("series/step", KeyError, r"series\['step'\] must be a JSON object"),
        ("tree/0/path", [], r"tree\[0\].path must be a non-empty list of names"),
        ("thread_totals/0/thread", 5, r"thread_totals\[0\].thread must index threads"),
        ("threads/0/pid", None, r"threads\[0\].pid must be an int >= 0, got None"),
        ("gauges/process.rss_mb/values", [], r"needs 1 <= len\(times_ns\) == len\(values\)"),
        ("start_ns", KeyError, "snapshot: start_ns is missing"),
        ("dropped_in_transfer", -1, "dropped_in_transfer must be an int >= 0, got -1"),
    ],
)
def test_each_broken_field_is_named_in_a_value_error(
    good: dict[str, Any], path: str, value: Any, message: str
) -> None:
    if path == "series/step" and value is KeyError:
        value = ["not", "an", "object"]
    with pytest.raises(ValueError, match=message):
        Snapshot.from_dict(broken(good, path, value))


def test_a_series_without_records_has_no_mean_rather_than_a_zero_division() -> None:
    import numpy as np

    empty = np.zeros(0, np.int64)
    data = SeriesData(0, 0, 0, 0.0, 0, 0, empty, empty, empty, np.zeros(0, np.bool_))
    stats = Snapshot({"x": data}, tree={("x",): NodeTotals(0, 0, 0)})["x"]
    assert stats.count == 0
    assert stats.mean_s != stats.mean_s  # NaN
