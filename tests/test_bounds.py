"""Memory and cost stay flat whatever names and threads a program makes (issue 14, item 4).

Each distinct name used to preallocate a full ring (about 250 KB at the default capacity:
30,000 names took 6 GB), and each short-lived thread added a root and its nodes for good
(100,000 threads: 300,001 nodes, a snapshot 8x slower).
"""

from __future__ import annotations

import threading
import tracemalloc

import pytest

import perfkit
from perfkit import PerfkitWarning, Registry
from perfkit._context import NODES
from tests.conftest import FakeClock

OTHER_THREADS = "other threads"


def test_names_past_max_series_are_dropped_counted_per_prefix_and_warned_once(clock: FakeClock) -> None:
    reg = Registry(capacity=100, clock=clock, max_series=50)
    with pytest.warns(PerfkitWarning, match="max_series=50") as said:
        for i in range(200):
            reg.record(f"request-{i}", clock(), clock() + 10)
            reg.record(f"user{i}", clock(), clock() + 10)
            reg.record("request-0", clock(), clock() + 10)  # an existing series keeps recording
        snap = reg.snapshot()
    assert len(snap) == 50
    assert snap["request-0"].count == 201
    assert snap.dropped == {"past max_series: request": 175, "past max_series: user": 175}
    assert len([w for w in said if "max_series" in str(w.message)]) == 1


def test_thousands_of_series_hold_memory_for_what_they_recorded_not_for_their_capacity(
    clock: FakeClock,
) -> None:
    reg = Registry(capacity=10_000, clock=clock)  # a full ring: 250 KB
    tracemalloc.start()
    try:
        for i in range(2000):
            reg.record(f"name{i}", clock(), clock() + 1)
        reg.drain()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 20e6  # preallocated: 2000 x 250 KB = 500 MB
    assert reg.snapshot()["name1999"].count == 1


def test_a_ring_grows_to_its_capacity_and_keeps_the_newest(clock: FakeClock) -> None:
    reg = Registry(capacity=1000, clock=clock)
    for k in range(2500):
        reg.record("step", clock(), clock() + k)
    stats = reg.snapshot()["step"]
    assert (stats.count, stats.n_samples, stats.min_s, stats.max_s) == (2500, 1000, 0.0, 2.499e-6)
    assert stats.median_s == pytest.approx(1.9995e-6)  # of the newest 1000 (1500..2499 ns)


def test_threads_past_the_bound_share_one_root_and_nothing_is_lost(monkeypatch: pytest.MonkeyPatch) -> None:
    # The bound is perfkit._context.MAX_ROOTS (4096) per process; lowered here so that the test
    # needs few threads and leaves room for the roots of later tests.
    roots = getattr(NODES, "_root_by_thread", {})
    room = 100
    monkeypatch.setattr(NODES, "max_roots", len(roots) + room, raising=False)
    reg = Registry(capacity=10)
    before = len(NODES.names)

    def work() -> None:
        with perfkit.section("job", registry=reg), perfkit.section("inner", registry=reg):
            pass

    for _ in range(room + 500):
        t = threading.Thread(target=work)
        t.start()
        t.join()
    grown = len(NODES.names) - before
    assert grown <= 3 * room + 3  # a root and two sections per thread, up to the bound; then none
    snap = reg.snapshot()
    assert snap["job"].count == snap["inner"].count == room + 500
    assert snap.tree[("job",)].count == room + 500
    assert OTHER_THREADS in {t.name for t in snap.by_thread("job")}


def test_paths_past_the_node_bound_are_dropped_and_counted(
    monkeypatch: pytest.MonkeyPatch, reg: Registry, clock: FakeClock
) -> None:
    monkeypatch.setattr(NODES, "max_nodes", len(NODES.names) + 5, raising=False)
    with pytest.warns(PerfkitWarning, match="distinct paths of sections"):
        for i in range(20):
            reg.record(f"unique-path-{i}", clock(), clock() + 10)
        snap = reg.snapshot()
    assert len(snap) == 5
    assert snap.dropped == {"node table full": 15}
