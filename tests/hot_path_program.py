"""One program over every entry point, with a clock that counts: what it records, as JSON.

Run by test_hot_path.py once on each path (compiled, and ``PERFKIT_PURE=1``). The clock moves 1 µs
per read, so both runs record the same nanoseconds if, and only if, both paths read the clock
at the same points, nest the same way, flag the same failures and keep the same order.
"""

from __future__ import annotations

import contextlib
import json
import sys
import threading
from collections.abc import Iterator
from typing import Any

import perfkit
import perfkit._context
from perfkit._accel import HOT_PATH
from perfkit._buffer import DRAIN_AT
from perfkit._state import set_tracer


class CountingClock:
    def __init__(self) -> None:
        self.now = 10_000_000

    def __call__(self) -> int:
        self.now += 1_000
        return self.now


class FlakyClock(CountingClock):
    """A counting clock whose reads number ``fail_at`` raise (a clock gone wrong mid-run)."""

    def __init__(self, fail_at: set[int]) -> None:
        super().__init__()
        self.reads = 0
        self.fail_at = fail_at

    def __call__(self) -> int:
        self.reads += 1
        if self.reads in self.fail_at:
            raise OSError(f"clock read {self.reads}")
        return super().__call__()


class RecordingTracer:
    """A profiler window's tracer: counts the ranges opened and closed."""

    def __init__(self) -> None:
        self.opened: list[str] = []
        self.closed = 0

    def begin(self, name: str) -> object:
        self.opened.append(name)
        return len(self.opened)

    def end(self, handle: object) -> None:
        self.closed += 1


def program(reg: perfkit.Registry) -> dict[str, Any]:
    """Every kind of call the hot path takes, and the uncommon cases it hands to Python."""

    @perfkit.timed("leaf", registry=reg)
    def leaf(x: int, *, scale: int = 1) -> int:
        return x * scale

    @perfkit.timed("fails", registry=reg)
    def fails() -> None:
        raise KeyError("planted")

    @perfkit.timed("recurse", registry=reg)
    def recurse(n: int) -> int:
        return 0 if n == 0 else 1 + recurse(n - 1)

    class Model:
        @perfkit.timed("method", registry=reg)
        def forward(self, x: int) -> int:
            return leaf(x)

        @perfkit.timed("static", registry=reg)
        @staticmethod
        def helper() -> int:
            return 1

    @perfkit.timed("gen", registry=reg)
    def gen(n: int) -> Iterator[int]:
        for i in range(n):
            yield leaf(i)

    step = perfkit.section("step", registry=reg)
    post = perfkit.section("post", registry=reg)
    snapshots: list[Any] = []

    for epoch in range(3):
        with step:
            leaf(epoch, scale=2)
            Model().forward(epoch)
            Model.helper()
            recurse(3)
            with contextlib.suppress(KeyError):
                fails()
            with post:
                sum(gen(3))
            try:
                with post:
                    raise ValueError("planted")
            except ValueError:
                pass
        for batch in perfkit.timed_iter([1, 2, 3, 4], "train", registry=reg):
            with post:
                leaf(batch)
        items = perfkit.timed_iter(iter(range(10)), "early", registry=reg)
        for i in items:
            if i == 2:
                break
        items.close()

        def broken() -> Iterator[int]:
            yield 1
            raise OSError("planted")

        try:
            for _ in perfkit.timed_iter(broken(), "broken", registry=reg):
                leaf(0)
        except OSError:
            pass
        snapshots.append(reg.cursor())

    perfkit.disable()
    leaf(1)
    with post:
        leaf(2)
    list(perfkit.timed_iter([1, 2], "off", registry=reg))
    perfkit.enable()

    tracer = RecordingTracer()
    set_tracer(tracer)
    with step:
        leaf(5)
    list(perfkit.timed_iter([1, 2], "traced", registry=reg))
    set_tracer(None)

    with perfkit.use_registry(reg):  # the default-registry form of every entry point
        timed_default = perfkit.timed("default")(lambda: None)
        for _ in range(5):
            timed_default()
            with perfkit.section("default.block"):
                pass
        list(perfkit.timed_iter(range(3), "default"))

    thread = threading.Thread(target=lambda: [leaf(i) for i in range(4)], name="other")
    thread.start()
    thread.join()

    # Across drains, with a record() of the Python path between the compiled ones of one series.
    for i in range(DRAIN_AT // 3 + 50):
        leaf(i)
        if i % 1000 == 0:
            t = reg.clock()
            reg.record("leaf", t - 500, t)

    return {
        "faults": faults(),
        "run": comparable(reg.snapshot()),
        "window": comparable(reg.snapshot(since=snapshots[1])),
        "tracer": [tracer.opened, tracer.closed],
        "pending": reg.pending,
        "clock": reg.clock(),
    }


def faults() -> dict[str, Any]:
    """A clock that raises at chosen reads, calls that raise, a ring that overflows, a record of a
    past interval among the compiled ones: what is raised, what is recorded, what stays pending."""
    flaky = perfkit.Registry(capacity=3, clock=FlakyClock(fail_at={5, 12, 13, 21, 30, 41, 42, 55, 60}))
    f = perfkit.timed("f", registry=flaky)(lambda: None)

    @perfkit.timed("g", registry=flaky)
    def g() -> None:
        raise KeyError("planted")

    block = perfkit.section("s", registry=flaky)
    raised: list[list[str | None]] = []
    for i in range(20):
        try:
            if i % 4 == 0:
                f()
            elif i % 4 == 1:
                g()
            elif i % 4 == 2:
                with block:
                    f()
            else:
                for _ in perfkit.timed_iter([1, 2], "it", registry=flaky):
                    pass
            raised.append(None)
        except (OSError, KeyError) as exc:
            context = exc.__context__
            raised.append([repr(exc), None if context is None else repr(context)])
        if i == 10:
            flaky.record("f", 10_000_000, 10_000_500)  # measured earlier, recorded now
    # The clock failing at the end of calls that raised: its error, in the context of theirs.
    # Clock reads 1-2: the registry's; 3-6: two calls of g; 7-8: iter() on the loader; 9-10: a
    # next() whose source raises.
    ending = perfkit.Registry(clock=FlakyClock(fail_at={4, 6, 10}))
    g_end = perfkit.timed("g", registry=ending)(g.__wrapped__)
    for call in (
        g_end,
        g_end,
        lambda: next(perfkit.timed_iter(iter(lambda: 1 // 0, None), "it", registry=ending)),
    ):
        try:
            call()
        except OSError as exc:
            raised.append([repr(exc), repr(exc.__context__)])
    cell = perfkit._context.get_cell(None)
    after = {"open path": list(perfkit._context.NODES.path(cell[0])) if cell else None}

    failing = perfkit.Registry(capacity=10, clock=CountingClock())
    h = perfkit.timed("h", registry=failing)(g.__wrapped__)
    most = 0
    for _ in range(DRAIN_AT):
        with contextlib.suppress(KeyError):
            h()
        most = max(most, failing.pending)
    return {
        "raised": raised,
        "after": after,
        "records": comparable(flaky.snapshot()),
        "most pending while calls fail": most,
        "failed calls": failing.snapshot()["h"].errors,
    }


def comparable(snap: perfkit.Snapshot) -> dict[str, Any]:
    """The whole snapshot but the pids and thread ids, which differ from one process to the next."""
    out = snap.to_dict()
    out["threads"] = [t["name"] for t in out["threads"]]
    return out


def main() -> int:
    reg = perfkit.Registry(capacity=500, clock=CountingClock())
    json.dump({"hot_path": HOT_PATH, "records": program(reg)}, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
