"""Registry: bounded rings with exact totals, windows through cursors, scoping and fork safety."""

from __future__ import annotations

import multiprocessing as mp
import os

import pytest

import perfkit
from perfkit import Registry

from .conftest import FakeClock


def record_n(reg: Registry, clock: FakeClock, name: str, durations: list[int]) -> None:
    for d in durations:
        t0 = clock()
        clock.advance(d)
        reg.record(name, t0, clock())


def test_the_ring_keeps_the_newest_and_totals_stay_exact(clock: FakeClock) -> None:
    reg = Registry(capacity=10, clock=clock)
    record_n(reg, clock, "step", list(range(1, 101)))
    stats = reg.snapshot()["step"]
    assert (stats.count, stats.total_s, stats.n_samples, stats.dropped) == (100, 5050e-9, 10, 90)
    assert (stats.min_s, stats.max_s) == (1e-9, 100e-9)  # run-wide extremes are exact
    assert stats.median_s == pytest.approx(95.5e-9)  # percentiles: the 10 newest samples
    assert stats.std_s == pytest.approx(28.866070047722118e-9)  # numpy's std of 1..100


def test_a_window_covers_only_what_follows_its_cursor(reg: Registry, clock: FakeClock) -> None:
    record_n(reg, clock, "step", [5, 5, 5])
    start = reg.cursor()
    record_n(reg, clock, "step", [1, 2])
    record_n(reg, clock, "val", [7])
    window = reg.snapshot(since=start)
    assert (window["step"].count, window["step"].total_s) == (2, 3e-9)
    assert window["val"].count == 1
    assert reg.snapshot()["step"].count == 5


def test_series_without_records_in_the_window_are_absent(reg: Registry, clock: FakeClock) -> None:
    record_n(reg, clock, "old", [1])
    start = reg.cursor()
    assert "old" not in reg.snapshot(since=start)


def test_a_window_larger_than_the_ring_says_how_many_were_dropped(clock: FakeClock) -> None:
    reg = Registry(capacity=4, clock=clock)
    record_n(reg, clock, "step", [1000] * 3)
    start = reg.cursor()
    record_n(reg, clock, "step", [1, 2, 3, 4, 5, 6])
    stats = reg.snapshot(since=start)["step"]
    assert (stats.count, stats.total_s, stats.n_samples, stats.dropped) == (6, 21e-9, 4, 2)
    assert stats.mean_s == pytest.approx(3.5e-9)
    assert stats.std_s == pytest.approx(1.707825127659933e-9)  # exact over all six, from the moments
    assert (stats.min_s, stats.max_s) == (3e-9, 6e-9)  # from the four retained


def test_window_bounds_come_from_the_clock(reg: Registry, clock: FakeClock) -> None:
    clock.advance(1_000)
    start = reg.cursor()
    clock.advance(2_000_000)
    assert reg.snapshot(since=start).duration_s == pytest.approx(0.002)


def test_a_clock_that_goes_backwards_never_gives_a_negative_duration(reg: Registry, clock: FakeClock) -> None:
    with perfkit.section("skew", registry=reg):
        clock.advance(-500)
    stats = reg.snapshot()["skew"]
    assert (stats.total_s, stats.min_s) == (0.0, 0.0)


def test_a_cursor_from_another_registry_is_rejected(reg: Registry) -> None:
    other = Registry()
    with pytest.raises(ValueError, match="since must be a Cursor taken from this registry"):
        reg.snapshot(since=other.cursor())
    with pytest.raises(ValueError, match="since must be a Cursor"):
        reg.snapshot(since="yesterday")  # type: ignore[arg-type]


def test_reset_forgets_and_old_cursors_cover_everything_after_it(reg: Registry, clock: FakeClock) -> None:
    record_n(reg, clock, "a", [1, 1])
    start = reg.cursor()
    reg.reset()
    record_n(reg, clock, "b", [3])
    assert list(reg.snapshot()) == ["b"]
    assert list(reg.snapshot(since=start)) == ["b"]


@pytest.mark.parametrize("bad", [0, -5, 2.5, "10", True, None, 10**12])
def test_capacity_must_be_a_positive_int_up_to_its_documented_maximum(bad: object) -> None:
    with pytest.raises(ValueError, match=rf"capacity must be an int in \[1, 10,000,000\], got {bad!r}"):
        Registry(capacity=bad)  # type: ignore[arg-type]


def test_clock_must_be_callable() -> None:
    with pytest.raises(TypeError, match="clock must be a callable"):
        Registry(clock=5)  # type: ignore[arg-type]


def test_record_validates_its_name(reg: Registry) -> None:
    with pytest.raises(ValueError, match="name must be a non-empty str"):
        reg.record("", 0, 1)


def test_memory_is_set_by_capacity_not_by_the_number_of_records(clock: FakeClock) -> None:
    reg = Registry(capacity=100, clock=clock)
    record_n(reg, clock, "step", [1] * 5_000)
    reg.drain()
    ring = reg._series.rings["step"]
    assert ring.retained_since(0).durations_ns.shape == (100,)
    assert len(reg._buf) == 0


def test_use_registry_scopes_and_restores(clock: FakeClock) -> None:
    outer, inner = Registry(clock=clock), Registry(clock=clock)
    default = perfkit.get_registry()
    with perfkit.use_registry(outer):
        assert perfkit.get_registry() is outer
        with perfkit.use_registry(inner):
            assert perfkit.get_registry() is inner
        assert perfkit.get_registry() is outer
    assert perfkit.get_registry() is default


def test_use_registry_needs_a_registry() -> None:
    with pytest.raises(TypeError, match="registry must be a perfkit.Registry"), perfkit.use_registry(None):  # type: ignore[arg-type]
        pass


def test_module_shortcuts_act_on_the_current_registry(reg: Registry, clock: FakeClock) -> None:
    with perfkit.use_registry(reg):
        start = perfkit.cursor()
        with perfkit.section("x"):
            clock.advance(3)
        assert perfkit.snapshot(since=start)["x"].total_s == 3e-9
        perfkit.reset()
        assert len(perfkit.snapshot()) == 0


def _child_counts(queue: mp.Queue) -> None:  # type: ignore[type-arg]
    reg = perfkit.get_registry()
    before = dict(reg.snapshot())
    with perfkit.section("in_child"):
        pass
    after = reg.snapshot()
    queue.put((len(before), {name: after[name].count for name in after}, sorted(after.tree), os.getpid()))


@pytest.mark.skipif("fork" not in mp.get_all_start_methods(), reason="needs fork")
def test_a_forked_child_starts_with_a_clean_registry() -> None:
    with perfkit.section("in_parent"):
        pass
    ctx = mp.get_context("fork")
    queue = ctx.Queue()
    with perfkit.section("open_during_fork"):
        child = ctx.Process(target=_child_counts, args=(queue,))
        child.start()
        before, after, tree, pid = queue.get(timeout=30)
        child.join(timeout=30)
    assert child.exitcode == 0
    assert before == 0
    assert after == {"in_child": 1}
    assert tree == [("in_child",)]  # sections open in the parent are not open in the child
    assert pid != os.getpid()
    assert perfkit.snapshot()["in_parent"].count >= 1
