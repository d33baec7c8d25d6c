"""Recursion folds: a call path that re-enters a name is recorded, snapshotted and printed at the
cost of a flat one, as one node of the tree that says where it recursed and how deep."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator

import numpy as np
import pytest

import perfkit
from perfkit import Registry, Snapshot
from perfkit._context import NODES, ThreadInfo
from perfkit._snapshot import Recursion
from perfkit._transfer import RecordBatch

from .conftest import FakeClock


@pytest.fixture
def deep() -> Iterator[None]:
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(20_000)
    yield
    sys.setrecursionlimit(limit)


def test_a_recursive_function_is_one_node_whose_inner_calls_are_counted_with_their_depth(
    reg: Registry, clock: FakeClock
) -> None:
    @perfkit.timed("fact", registry=reg)
    def fact(n: int) -> int:
        clock.advance(1)
        return n * fact(n - 1) if n > 1 else 1

    assert fact(5) == 120
    snap = reg.snapshot()
    assert list(snap.tree) == [("fact",)]
    assert (snap["fact"].count, snap["fact"].total_s) == (1, 5e-9)  # the outer call, its 5 ns
    assert dict(snap.recursion) == {("fact", "fact"): Recursion(count=4, depth=5)}


def test_mutual_recursion_folds_into_the_deepest_open_call_and_no_time_is_counted_twice(
    reg: Registry, clock: FakeClock
) -> None:
    @perfkit.timed("expr", registry=reg)
    def expr(n: int) -> None:
        clock.advance(10)
        with perfkit.section("leaf", registry=reg):
            clock.advance(1)
        if n:
            term(n - 1)

    @perfkit.timed("term", registry=reg)
    def term(n: int) -> None:
        clock.advance(100)
        expr(n)

    expr(6)  # expr term expr term ... : 7 calls of expr, 6 of term
    snap = reg.snapshot()
    assert set(snap.tree) == {("expr",), ("expr", "leaf"), ("expr", "term"), ("expr", "term", "leaf")}
    assert snap.tree[("expr",)].total_ns == 7 * 11 + 6 * 100  # the outer call: everything
    assert snap.tree[("expr", "term")].total_ns == 6 * 11 + 6 * 100  # term's outer call
    assert snap.tree[("expr", "term", "leaf")].count == 6  # leaves of the inner calls: under term
    assert dict(snap.recursion) == {
        ("expr", "term", "expr"): Recursion(count=6, depth=7),
        ("expr", "term", "term"): Recursion(count=5, depth=6),
    }


def test_a_section_reentered_inside_itself_is_folded_like_a_function(reg: Registry, clock: FakeClock) -> None:
    walk = perfkit.section("walk", registry=reg)

    def visit(depth: int) -> None:
        with walk:
            clock.advance(1)
            if depth:
                visit(depth - 1)

    visit(2)
    snap = reg.snapshot()
    assert (snap["walk"].count, snap.tree[("walk",)].total_ns) == (1, 3)
    assert snap.recursion[("walk", "walk")] == Recursion(count=2, depth=3)


def test_3000_deep_interns_two_nodes_and_prints_in_as_many_lines_as_30_deep(deep: None) -> None:
    reg = Registry()  # a real clock: three calls one after the other are not nested

    @perfkit.timed("walk", registry=reg)
    def walk(n: int) -> int:
        return 0 if n == 0 else walk(n - 1) + 1

    texts = []
    for depth in (30, 3000):
        nodes = len(NODES.names)
        start = reg.cursor()
        with perfkit.section(f"epoch{depth}", registry=reg):
            for _ in range(3):
                walk(depth)
        assert len(NODES.names) - nodes <= 3  # the epoch, walk inside it, and its fold
        snap = reg.snapshot(since=start)
        assert snap.recursion[(f"epoch{depth}", "walk", "walk")] == Recursion(
            count=3 * depth, depth=depth + 1
        )
        texts.append(perfkit.report(snap))
    assert len(texts[0].splitlines()) == len(texts[1].splitlines())
    assert "↻ walk, 3,001 deep" in texts[1]
    assert abs(len(texts[1]) - len(texts[0])) < 20  # the same lines, wider numbers


def test_the_recursion_survives_json_and_merges_by_count_and_deepest_depth(reg: Registry) -> None:
    @perfkit.timed("walk", registry=reg)
    def walk(n: int) -> int:
        return 0 if n == 0 else walk(n - 1)

    walk(3)
    one = reg.snapshot()
    assert Snapshot.from_json(one.to_json()) == one
    start = reg.cursor()
    walk(6)
    two = reg.snapshot(since=start)
    assert one.merge(two).recursion[("walk", "walk")] == Recursion(count=3 + 6, depth=7)


def test_a_fold_a_worker_sends_is_a_fold_where_it_arrives(reg: Registry) -> None:
    worker = ThreadInfo(pid=4242, tid=1, name="MainThread", worker=0)
    batch = RecordBatch(
        threads=(worker,),
        paths=((0, ("collate",)), (0, ("collate", "collate.recursion"))),
        overlay=(1,),
        nodes=np.array([1, 1, 0], np.int64),
        starts=np.array([20, 30, 10], np.int64),
        durations=np.array([20, 5, 50], np.int64),
        errors=np.zeros(3, np.bool_),
        dropped=0,
    )
    reg.receive(batch)
    snap = reg.snapshot()
    assert list(snap.tree) == [("collate",)]
    assert snap.recursion[("collate", "collate")] == Recursion(count=2, depth=3)


def test_a_thread_started_inside_a_recursion_nests_under_the_call_it_came_from(reg: Registry) -> None:
    def io() -> None:
        with perfkit.section("io", registry=reg):
            pass

    async def fetch() -> None:
        await asyncio.to_thread(io)

    @perfkit.timed("walk", registry=reg)
    def walk(n: int) -> None:
        if n:
            walk(n - 1)
        else:
            asyncio.run(fetch())

    walk(2)
    snap = reg.snapshot()
    assert snap.tree[("walk", "io")].count == 1
    assert snap.recursion[("walk", "walk")].count == 2
