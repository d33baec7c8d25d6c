"""What each step of a ``@timed`` call costs on the pure-Python path: a profile by construction.

    python benchmarks/bench_hot_path_parts.py              # about a minute
    python benchmarks/bench_hot_path_parts.py --compiled   # the compiled @timed and its drain

Runs on the pure-Python path (it sets ``PERFKIT_PURE=1`` for itself). Builds the wrapper up one
step at a time (each row adds one step to the row above: the switch, the registry lookup, the
context's cell, the node lookup, the clock reads, the append) and times every row in the same
interleaved rounds, median over rounds, in ns over a bare call. The last row is perfkit's own
wrapper; its difference to the row above is the drain's share (turning pending records into
numpy columns), timed alone at the end. With ``--compiled``: the compiled ``@timed`` and the
drain of its records (packed int64, no Python ints to convert).
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
from collections.abc import Callable
from time import perf_counter_ns
from typing import Any

os.environ["PERFKIT_PURE"] = "0" if "--compiled" in sys.argv else "1"

from contextvars import ContextVar

import perfkit

Fn = Callable[[], None]


def noop() -> None:
    pass


class Switch:
    __slots__ = ("on", "tracer")

    def __init__(self) -> None:
        self.on = True
        self.tracer: object = None


def steps(reg: perfkit.Registry) -> dict[str, Fn]:
    """The wrapper's steps over stand-ins of the same kinds as perfkit's own (a slots switch, two
    ContextVars, a dict of nodes), so that each row costs what the step costs in perfkit."""
    name = "parts"
    registry = None
    switch = Switch()
    current_registry = ContextVar("registry", default=reg).get
    cells: ContextVar[list[Any]] = ContextVar("cell")
    cells.set([2, 0])
    get_cell = cells.get
    kids = {2: 3}

    def new_cell() -> list[Any]:
        raise AssertionError("every call here has its cell")

    def child(parent: int, name: str) -> int:
        raise AssertionError("every node here is interned")

    def passthrough(*args: Any, **kwargs: Any) -> None:
        return noop(*args, **kwargs)

    def with_switch(*args: Any, **kwargs: Any) -> None:
        if not switch.on:
            return noop(*args, **kwargs)
        if switch.tracer is not None:
            return None
        return noop(*args, **kwargs)

    def with_registry(*args: Any, **kwargs: Any) -> None:
        if not switch.on:
            return noop(*args, **kwargs)
        if switch.tracer is not None:
            return None
        reg = registry or current_registry()
        clock = reg.clock
        del clock
        return noop(*args, **kwargs)

    def with_cell(*args: Any, **kwargs: Any) -> None:
        if not switch.on:
            return noop(*args, **kwargs)
        if switch.tracer is not None:
            return None
        reg = registry or current_registry()
        clock = reg.clock
        del clock
        cell = get_cell(None) or new_cell()
        parent = cell[0]
        del parent
        return noop(*args, **kwargs)

    def with_node(*args: Any, **kwargs: Any) -> None:
        if not switch.on:
            return noop(*args, **kwargs)
        if switch.tracer is not None:
            return None
        reg = registry or current_registry()
        clock = reg.clock
        del clock
        cell = get_cell(None) or new_cell()
        parent = cell[0]
        try:
            node = kids[parent]
        except KeyError:
            node = child(parent, name)
        cell[0] = node
        try:
            result = noop(*args, **kwargs)
        except BaseException:
            cell[0] = parent
            raise
        cell[0] = parent
        return result

    def with_clock(*args: Any, **kwargs: Any) -> None:
        if not switch.on:
            return noop(*args, **kwargs)
        if switch.tracer is not None:
            return None
        reg = registry or current_registry()
        cell = get_cell(None) or new_cell()
        parent = cell[0]
        try:
            node = kids[parent]
        except KeyError:
            node = child(parent, name)
        cell[0] = node
        clock = reg.clock
        t0 = clock()
        try:
            result = noop(*args, **kwargs)
        except BaseException:
            cell[0] = parent
            raise
        t1 = clock()
        cell[0] = parent
        del t0, t1
        return result

    sink: list[int] = []

    def with_append(*args: Any, **kwargs: Any) -> None:
        if not switch.on:
            return noop(*args, **kwargs)
        if switch.tracer is not None:
            return None
        reg = registry or current_registry()
        cell = get_cell(None) or new_cell()
        parent = cell[0]
        try:
            node = kids[parent]
        except KeyError:
            node = child(parent, name)
        cell[0] = node
        clock = reg.clock
        t0 = clock()
        try:
            result = noop(*args, **kwargs)
        except BaseException:
            cell[0] = parent
            raise
        t1 = clock()
        cell[0] = parent
        buf = sink
        buf += (node, t0, t1)
        if len(buf) > 3 * 4096:
            buf.clear()  # what the drain would take: not done here
        return result

    with perfkit.use_registry(reg):
        pass
    return {
        "a pass-through decorator": passthrough,
        "+ the on/off switch and the tracer check": with_switch,
        "+ the registry lookup (a ContextVar)": with_registry,
        "+ the context's cell (a ContextVar)": with_cell,
        "+ the node lookup, set and restore": with_node,
        "+ two clock reads": with_clock,
        "+ the append of three ints": with_append,
        "perfkit @timed, pure Python (+ the drain's share)": perfkit.timed(name)(noop),
    }


def loop(fn: Fn) -> Callable[[int], None]:
    def run(n: int) -> None:
        for _ in range(n):
            fn()

    return run


def per_call(run: Callable[[int], None], n: int) -> float:
    gc.collect()
    t0 = perf_counter_ns()
    run(n)
    return (perf_counter_ns() - t0) / n


def drain_per_record(make: Fn, reg: perfkit.Registry, records: int, rounds: int) -> float:
    """ns per record of ``reg.drain()`` after ``records`` calls of ``make`` (one series)."""
    out = []
    for _ in range(rounds):
        reg.drain()
        for _ in range(records):
            make()
        t0 = perf_counter_ns()
        reg.drain()
        out.append((perf_counter_ns() - t0) / records)
    return statistics.median(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="few calls: check that it runs")
    parser.add_argument("--compiled", action="store_true", help="time the compiled path instead")
    args = parser.parse_args(argv)
    n, rounds = (2_000, 2) if args.quick else (200_000, 9)
    reg = perfkit.Registry(capacity=10_000)
    with perfkit.use_registry(reg):
        parts = steps(reg)
        if args.compiled:
            parts = {"a pass-through decorator": parts["a pass-through decorator"]}
            parts["perfkit @timed, compiled (+ the drain's share)"] = perfkit.timed("parts")(noop)
        rows = {name: loop(fn) for name, fn in parts.items()}
        bare = loop(noop)
        samples: dict[str, list[float]] = {name: [] for name in rows}
        base: list[float] = []
        for _ in range(rounds):
            base.append(per_call(bare, n))
            for name, run in rows.items():
                samples[name].append(per_call(run, n))
    floor = statistics.median(base)
    print(
        f"python {sys.version.split()[0]}, hot path: {perfkit.hot_path()}; bare call {floor:.0f} ns; "
        f"ns over a bare call, median of {rounds}"
    )

    previous = 0.0
    for name, values in samples.items():
        ns = statistics.median(values) - floor
        print(f"{name:<55}{ns:>8.0f}{ns - previous:>+9.0f}")
        previous = ns
    records = 4096
    timed = perfkit.timed("drain", registry=reg)(noop)
    per_record = drain_per_record(timed, reg, records, rounds)
    print(f"{'the drain alone, per record (batches of 4,096)':<55}{per_record:>8.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
