"""timed_iter: the wait for each item, the time per turn, and an iterator that behaves like its source."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import perfkit
from perfkit import Registry

from .conftest import FakeClock


class SlowSource:
    """An iterator whose every item takes ``wait_ns`` of the fake clock to produce."""

    def __init__(self, clock: FakeClock, n: int, wait_ns: int) -> None:
        self.clock, self.left, self.wait_ns = clock, n, wait_ns
        self.closed = False

    def __iter__(self) -> Iterator[int]:
        return self

    def __next__(self) -> int:
        if self.left == 0:
            raise StopIteration
        self.clock.advance(self.wait_ns)
        self.left -= 1
        return self.left

    def close(self) -> None:
        self.closed = True


def test_yields_the_same_items(reg: Registry) -> None:
    assert list(perfkit.timed_iter(iter("abc"), "letters", registry=reg)) == ["a", "b", "c"]


def test_wait_and_turn_give_the_wait_fraction(reg: Registry, clock: FakeClock) -> None:
    for _ in perfkit.timed_iter(SlowSource(clock, 4, wait_ns=100), "loader", registry=reg):
        clock.advance(300)  # the loop body
    snap = reg.snapshot()
    wait, turn = snap["loader.data.wait"], snap["loader.loop.turn"]
    assert (wait.count, wait.total_s) == (4, 400e-9)
    assert (turn.count, turn.total_s) == (4, 1600e-9)
    assert wait.total_s / turn.total_s == pytest.approx(0.25)


def test_keeps_len_of_a_sized_source_and_has_none_otherwise(reg: Registry) -> None:
    sized = perfkit.timed_iter([1, 2, 3], "sized", registry=reg)
    assert len(sized) == 3
    unsized = perfkit.timed_iter((x for x in range(3)), "unsized", registry=reg)
    with pytest.raises(TypeError):
        len(unsized)  # type: ignore[arg-type]


def test_close_closes_the_source_and_records_the_turn_in_progress(reg: Registry, clock: FakeClock) -> None:
    source = SlowSource(clock, 10, wait_ns=1)
    items = perfkit.timed_iter(source, "early", registry=reg)
    for i in items:
        clock.advance(50)
        if i == 8:  # the second item
            break
    items.close()
    assert source.closed
    assert reg.snapshot()["early.loop.turn"].count == 2


def test_work_done_inside_next_nests_under_the_wait(reg: Registry, clock: FakeClock) -> None:
    def produce():  # type: ignore[no-untyped-def]
        for i in range(2):
            with perfkit.section("collate", registry=reg):
                clock.advance(7)
            yield i

    with perfkit.section("epoch", registry=reg):
        for _ in perfkit.timed_iter(produce(), "train", registry=reg):
            pass
    tree = reg.snapshot().tree
    assert tree[("epoch", "train.data.wait", "collate")].count == 2
    assert not any("train.loop.turn" in path for path in tree)  # turns overlap: not part of the tree


def test_an_error_in_the_source_is_recorded_and_propagates(reg: Registry) -> None:
    def broken():  # type: ignore[no-untyped-def]
        yield 1
        raise OSError("corrupt file")

    it = perfkit.timed_iter(broken(), "files", registry=reg)
    assert next(it) == 1
    with pytest.raises(OSError, match="corrupt file"):
        next(it)
    assert reg.snapshot()["files.data.wait"].errors == 1


def test_disabled_iteration_records_nothing(reg: Registry) -> None:
    perfkit.disable()
    assert list(perfkit.timed_iter(range(3), "off", registry=reg)) == [0, 1, 2]
    assert len(reg.snapshot()) == 0


def test_series_names_are_the_loaders_and_never_a_stages_step(reg: Registry) -> None:
    it = perfkit.timed_iter([], "val", registry=reg)
    assert (it.wait_name, it.turn_name) == ("val.data.wait", "val.loop.turn")


def test_iter_on_the_source_is_timed_once(reg: Registry, clock: FakeClock) -> None:
    class Starts:
        def __iter__(self) -> Iterator[int]:
            clock.advance(5_000)  # a DataLoader starting its workers
            return iter([1, 2])

    assert list(perfkit.timed_iter(Starts(), "val", registry=reg)) == [1, 2]
    started = reg.snapshot()["val.data.iter"]
    assert (started.count, started.total_s) == (1, 5e-6)


def test_a_timed_loop_never_changes_another_windows_tree(clock: FakeClock) -> None:
    """Leaving loop turns out of the tree is a property of the turn's own node, not of its name:
    a section that happens to carry the same name elsewhere stays in its registry's tree."""
    list(perfkit.timed_iter(range(3), "val", registry=Registry(clock=clock)))
    mine = Registry(clock=clock)
    with perfkit.section("epoch", registry=mine), perfkit.section("val.loop.turn", registry=mine):
        clock.advance(10)
    with perfkit.section("train.step", registry=mine):
        clock.advance(10)
    assert {("epoch", "val.loop.turn"), ("train.step",)} <= set(mine.snapshot().tree)
