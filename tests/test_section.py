"""section: a nestable block timer that is also a decorator."""

from __future__ import annotations

import threading

import pytest

import perfkit
from perfkit import Registry

from .conftest import FakeClock


def test_block_is_recorded_with_its_duration(reg: Registry, clock: FakeClock) -> None:
    with perfkit.section("load", registry=reg):
        clock.advance(1_500)
    stats = reg.snapshot()["load"]
    assert (stats.count, stats.total_s, stats.errors) == (1, 1.5e-6, 0)


def test_sections_nest_into_a_tree_with_exact_totals(reg: Registry, clock: FakeClock) -> None:
    with perfkit.section("epoch", registry=reg):
        for _ in range(3):
            with perfkit.section("batch", registry=reg):
                clock.advance(10)
                with perfkit.section("forward", registry=reg):
                    clock.advance(5)
        clock.advance(1)
    tree = reg.snapshot().tree
    assert tree[("epoch",)].total_ns == 46
    assert tree[("epoch", "batch")].count == 3
    assert tree[("epoch", "batch")].total_ns == 45
    assert tree[("epoch", "batch", "forward")].total_ns == 15


def test_a_raising_block_is_recorded_flagged_and_the_exception_is_unchanged(reg: Registry) -> None:
    error = RuntimeError("disk on fire")
    with pytest.raises(RuntimeError) as caught, perfkit.section("save", registry=reg):
        raise error
    assert caught.value is error
    assert reg.snapshot()["save"].errors == 1


def test_as_a_decorator_each_call_is_one_record(reg: Registry) -> None:
    @perfkit.section("collate", registry=reg)
    def collate(xs: list[int]) -> int:
        return sum(xs)

    assert collate([1, 2]) == 3
    assert collate([3]) == 3
    assert reg.snapshot()["collate"].count == 2


def test_the_same_object_can_be_reentered(reg: Registry, clock: FakeClock) -> None:
    walk = perfkit.section("walk", registry=reg)

    def visit(depth: int) -> None:
        with walk:
            clock.advance(1)
            if depth:
                visit(depth - 1)

    visit(2)
    snap = reg.snapshot()
    assert (snap["walk"].count, snap.tree[("walk",)].total_ns) == (1, 3)  # the outer block
    assert snap.recursion[("walk", "walk")].count == 2  # the inner ones, folded (tests/test_recursion.py)


def test_one_object_used_from_several_threads_at_once(reg: Registry) -> None:
    shared = perfkit.section("shared", registry=reg)
    barrier = threading.Barrier(4)

    def run() -> None:
        barrier.wait()
        for _ in range(500):
            with shared:
                pass

    threads = [threading.Thread(target=run) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert reg.snapshot()["shared"].count == 2_000


def test_a_generator_suspended_inside_its_own_section_loses_no_record(reg: Registry) -> None:
    def batches():  # type: ignore[no-untyped-def]
        for i in range(2):
            with perfkit.section("produce", registry=reg):
                yield i

    gen = batches()
    with perfkit.section("consume", registry=reg):
        next(gen)  # "produce" is left open above "consume"
    for _ in gen:
        pass
    snap = reg.snapshot()
    assert (snap["consume"].count, snap["produce"].count) == (1, 2)
    with perfkit.section("after", registry=reg):
        pass
    assert ("after",) in reg.snapshot().tree  # the context is healed: "after" is top level


def test_disabled_sections_record_nothing_and_run_the_block(reg: Registry) -> None:
    ran = []
    perfkit.disable()
    with perfkit.section("off", registry=reg):
        ran.append(1)
    perfkit.enable()
    assert ran == [1]
    assert len(reg.snapshot()) == 0


def test_switching_off_inside_a_block_still_closes_it(reg: Registry) -> None:
    with perfkit.section("outer", registry=reg):
        perfkit.disable()
    perfkit.enable()
    with perfkit.section("next", registry=reg):
        pass
    snap = reg.snapshot()
    assert (snap["outer"].count, ("next",) in snap.tree) == (1, True)


@pytest.mark.parametrize(("bad", "error"), [("", ValueError), (None, TypeError), (b"x", TypeError)])
def test_bad_names_fail_at_construction_naming_the_value(bad: object, error: type[Exception]) -> None:
    with pytest.raises(error, match=f"name must be a non-empty str, got {bad!r}"):
        perfkit.section(bad)  # type: ignore[arg-type]


def test_bad_registry_is_rejected() -> None:
    with pytest.raises(TypeError, match="registry must be a perfkit.Registry or None, got 5"):
        perfkit.section("x", registry=5)  # type: ignore[arg-type]
