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
from perfkit._accel import HOT_PATH
from perfkit._registry import DRAIN_AT
from perfkit._state import set_tracer


class CountingClock:
    def __init__(self) -> None:
        self.now = 10_000_000

    def __call__(self) -> int:
        self.now += 1_000
        return self.now


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
        "run": comparable(reg.snapshot()),
        "window": comparable(reg.snapshot(since=snapshots[1])),
        "tracer": [tracer.opened, tracer.closed],
        "pending": reg.pending,
        "clock": reg.clock(),
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
