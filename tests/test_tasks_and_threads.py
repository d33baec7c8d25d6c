"""Each asyncio task and each thread has its own stack of open sections (issue 14, items 2 and 3).

A task created inside a section, or a function sent to another thread with
``asyncio.to_thread``, starts from a copy of its creator's context. Its sections must
nest under the creator's open section and never into a sibling's, and each block's
time must be its own. A generator suspended inside its section keeps its records
wherever it is resumed.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator

import perfkit
from perfkit import Registry
from tests.conftest import FakeClock


def durations_ms(reg: Registry, name: str) -> list[float]:
    return sorted(int(d) / 1e6 for d in reg.snapshot().data(name).durations_ns)


def test_two_tasks_in_the_same_section_each_get_their_own_time(reg: Registry, clock: FakeClock) -> None:
    # a enters at 0 and leaves at 20 ms; b enters at 10 and leaves at 50: true times 20 and 40 ms.
    async def main() -> None:
        a_in, b_in, a_out = asyncio.Event(), asyncio.Event(), asyncio.Event()

        async def a() -> None:
            with perfkit.section("work", registry=reg):
                a_in.set()
                await b_in.wait()
                clock.advance(10_000_000)  # t = 20 ms
            a_out.set()

        async def b() -> None:
            await a_in.wait()
            clock.advance(10_000_000)  # t = 10 ms
            with perfkit.section("work", registry=reg):
                b_in.set()
                await a_out.wait()
                clock.advance(30_000_000)  # t = 50 ms

        with perfkit.section("main", registry=reg):
            await asyncio.gather(a(), b())

    asyncio.run(main())
    assert durations_ms(reg, "work") == [20.0, 40.0]
    assert set(reg.snapshot().tree) == {("main",), ("main", "work")}


def test_two_hundred_tasks_nest_under_their_creator_and_never_into_each_other(reg: Registry) -> None:
    async def work() -> None:
        with perfkit.section("work", registry=reg):
            await asyncio.sleep(0)
            with perfkit.section("inner", registry=reg):
                await asyncio.sleep(0)

    async def main() -> None:
        with perfkit.section("main", registry=reg):
            await asyncio.gather(*(work() for _ in range(200)))

    asyncio.run(main())
    snap = reg.snapshot()
    assert set(snap.tree) == {("main",), ("main", "work"), ("main", "work", "inner")}
    assert snap.tree[("main", "work")].count == snap.tree[("main", "work", "inner")].count == 200


def test_a_task_started_inside_a_section_leaves_its_creator_where_it_was(reg: Registry) -> None:
    async def child(started: asyncio.Event, go_on: asyncio.Event) -> None:
        with perfkit.section("child", registry=reg):
            started.set()
            await go_on.wait()

    async def main() -> None:
        started, go_on = asyncio.Event(), asyncio.Event()
        with perfkit.section("main", registry=reg):
            task = asyncio.create_task(child(started, go_on))
            await started.wait()  # the child is now suspended inside its section
            with perfkit.section("mine", registry=reg):
                pass
            go_on.set()
            await task

    asyncio.run(main())
    assert set(reg.snapshot().tree) == {("main",), ("main", "child"), ("main", "mine")}


def test_to_thread_inside_a_section_gives_each_thread_its_own_time_and_thread(
    reg: Registry, clock: FakeClock
) -> None:
    a_in, b_in, a_out = threading.Event(), threading.Event(), threading.Event()
    lock = threading.Lock()

    def a() -> None:
        with perfkit.section("work", registry=reg):
            a_in.set()
            b_in.wait()
            with lock:
                clock.advance(10_000_000)  # t = 20 ms
        a_out.set()

    def b() -> None:
        a_in.wait()
        with lock:
            clock.advance(10_000_000)  # t = 10 ms
        with perfkit.section("work", registry=reg):
            b_in.set()
            a_out.wait()
            with lock:
                clock.advance(30_000_000)  # t = 50 ms

    async def main() -> None:
        with perfkit.section("main", registry=reg):
            await asyncio.gather(asyncio.to_thread(a), asyncio.to_thread(b))

    asyncio.run(main())
    snap = reg.snapshot()
    assert durations_ms(reg, "work") == [20.0, 40.0]
    assert set(snap.tree) == {("main",), ("main", "work")}
    assert len(snap.by_thread("work")) == 2  # each record belongs to the thread that made it
    assert threading.main_thread().name not in {t.name for t in snap.by_thread("work")}


def test_a_generator_resumed_on_a_new_thread_each_time_keeps_every_record(
    reg: Registry, clock: FakeClock
) -> None:
    def items() -> Iterator[int]:
        for i in range(10):
            with perfkit.section("item", registry=reg):
                clock.advance(1_000_000)
                yield i
                clock.advance(1_000_000)  # resumed elsewhere: still inside the block

    gen = items()
    got: list[int] = []
    for _ in range(11):  # the eleventh ends the generator
        t = threading.Thread(target=lambda: got.append(next(gen, -1)))
        t.start()
        t.join()
    assert got[:10] == list(range(10))
    stats = reg.snapshot()["item"]
    assert stats.count == 10
    assert stats.total_s == 10 * 0.002


def test_a_generator_handed_between_two_live_threads_keeps_every_record(
    reg: Registry, clock: FakeClock
) -> None:
    def items() -> Iterator[int]:
        for i in range(6):
            with perfkit.section("item", registry=reg):
                clock.advance(1_000_000)
                yield i

    gen = items()
    turns = [threading.Event() for _ in range(7)]

    def consume(first: int) -> None:
        for k in range(first, 7, 2):
            turns[k].wait()
            next(gen, None)
            if k + 1 < 7:
                turns[k + 1].set()

    threads = [threading.Thread(target=consume, args=(i,)) for i in (0, 1)]
    for t in threads:
        t.start()
    turns[0].set()
    for t in threads:
        t.join()
    stats = reg.snapshot()["item"]
    assert (stats.count, stats.total_s) == (6, 0.006)
