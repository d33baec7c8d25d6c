"""Snapshot: an immutable mapping that survives JSON and knows its threads and tree."""

from __future__ import annotations

import json
import threading

import pytest

import perfkit
from perfkit import Registry, Snapshot
from perfkit._formats import FormatError

from .conftest import FakeClock


def filled(reg: Registry, clock: FakeClock) -> Snapshot:
    with perfkit.section("epoch", registry=reg):
        for i in range(5):
            with perfkit.section("batch", registry=reg):
                clock.advance(100 + i)
        try:
            with perfkit.section("save", registry=reg):
                raise OSError
        except OSError:
            pass
    return reg.snapshot()


def test_is_a_read_only_mapping_sorted_by_total_time(reg: Registry, clock: FakeClock) -> None:
    snap = filled(reg, clock)
    assert list(snap) == ["epoch", "batch", "save"]
    assert len(snap) == 3
    assert "batch" in snap
    with pytest.raises(TypeError):
        snap["x"] = snap["batch"]  # type: ignore[index]
    with pytest.raises(KeyError):
        snap["missing"]


def test_json_round_trip_is_lossless(reg: Registry, clock: FakeClock) -> None:
    snap = filled(reg, clock)
    text = snap.to_json()
    back = Snapshot.from_json(text)
    assert back == snap
    assert back["save"].errors == 1
    assert back.data("save").sample_errors.tolist() == [True]
    assert json.loads(text)["series"]["batch"]["stats"]["count"] == 5


def test_from_dict_refuses_another_format_and_data_without_one() -> None:
    with pytest.raises(FormatError, match=r"^the snapshot is format 99; this perfkit reads format 1 \("):
        Snapshot.from_dict({"format": 99})
    with pytest.raises(
        ValueError, match=r"^the snapshot is not perfkit's: no format number \(format=None\)$"
    ):
        Snapshot.from_dict({"series": {}})


def test_knows_which_thread_each_sample_came_from(reg: Registry) -> None:
    def work() -> None:
        with perfkit.section("bg", registry=reg):
            pass

    t = threading.Thread(target=work, name="loader-thread")
    t.start()
    t.join()
    snap = reg.snapshot()
    (index,) = snap.data("bg").threads.tolist()
    assert snap.threads[index].name == "loader-thread"


def test_merge_renumbers_threads_and_keeps_both_sources(clock: FakeClock) -> None:
    a, b = Registry(clock=clock), Registry(clock=clock)
    with perfkit.section("x", registry=a):
        clock.advance(1)

    def other_thread() -> None:
        with perfkit.section("x", registry=b):
            clock.advance(2)

    t = threading.Thread(target=other_thread, name="rank1")
    t.start()
    t.join()
    merged = a.snapshot().merge(b.snapshot())
    names = [merged.threads[i].name for i in merged.data("x").threads.tolist()]
    assert sorted(names) == ["MainThread", "rank1"]
    assert merged["x"].total_s == 3e-9


def test_repr_is_short(reg: Registry, clock: FakeClock) -> None:
    assert repr(filled(reg, clock)).startswith("Snapshot(3 series: epoch, batch, save;")
