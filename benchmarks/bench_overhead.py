"""Overhead of perfkit's entry points against a floor and other timing tools, in one run.

    python benchmarks/bench_overhead.py            # the full table (about three minutes)
    python benchmarks/bench_overhead.py --both     # then again on the pure-Python path
    python benchmarks/bench_overhead.py --quick    # a smoke run with few calls

Every row is nanoseconds per call *over a bare call* of the same empty function
(or per item over a bare ``for`` loop), the median of interleaved rounds, and the
same figure as a multiple of the floor: two ``time.perf_counter_ns()`` calls and a
store into a preallocated list, written inline. The reference rows show what any
Python decorator or ``with`` statement costs before it does anything. The disabled
rows run in the same rounds, perfkit switched off around them: compare them with
the pass-through decorator and the empty ``with``. The first line says which hot
path ran (compiled, or pure Python: ``PERFKIT_PURE=1``).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import threading
import tracemalloc
from collections.abc import Callable
from time import perf_counter_ns
from typing import Any

import perfkit

Loop = Callable[[int], None]


def noop() -> None:
    pass


def passthrough(fn: Callable[[], None]) -> Callable[[], None]:
    def wrapper(*args: Any, **kwargs: Any) -> None:
        return fn(*args, **kwargs)

    return wrapper


def floor_decorator(fn: Callable[[], None]) -> Callable[[], None]:
    """The least a timing decorator can do: the floor's work, inside a wrapper."""
    out: list[int] = []

    def wrapper(*args: Any, **kwargs: Any) -> None:
        t0 = perf_counter_ns()
        fn(*args, **kwargs)
        out.append(perf_counter_ns() - t0)
        if len(out) > 4096:
            out.clear()

    return wrapper


class EmptyContext:
    __slots__ = ()

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def call_loop(fn: Callable[[], None]) -> Loop:
    def run(n: int) -> None:
        for _ in range(n):
            fn()

    return run


def floor_loop(n: int) -> None:
    out = [0] * n
    for i in range(n):
        t0 = perf_counter_ns()
        noop()
        out[i] = perf_counter_ns() - t0


def iter_loop(wrap: Callable[[list[int]], Any]) -> Loop:
    def run(n: int) -> None:
        for _ in wrap(list(range(n))):
            pass

    return run


def timed_loop(loop: Loop, n: int) -> float:
    gc.collect()
    t0 = perf_counter_ns()
    loop(n)
    return (perf_counter_ns() - t0) / n


def candidates() -> dict[str, tuple[Loop, str]]:
    """name -> (loop, baseline): "call" loops are compared with a bare call, "iter" with a bare loop.

    Each ``with`` loop is written the way users write it (``with section("x"):``), with no
    helper call in between that would add its own cost.
    """
    reg = perfkit.Registry(capacity=10_000)
    timed = perfkit.timed("bench.timed", registry=reg)(noop)
    section = perfkit.section

    def section_loop(n: int) -> None:
        for _ in range(n):
            with section("bench.section", registry=reg):
                noop()

    def empty_with_loop(n: int) -> None:
        for _ in range(n):
            with EmptyContext():
                noop()

    rows: dict[str, tuple[Loop, str]] = {
        "floor: 2x perf_counter_ns + list store": (floor_loop, "call"),
        "reference: pass-through decorator": (call_loop(passthrough(noop)), "call"),
        "reference: empty `with` object": (empty_with_loop, "call"),
        "reference: decorator doing the floor's work": (call_loop(floor_decorator(noop)), "call"),
        "perfkit @timed": (call_loop(timed), "call"),
        "perfkit section": (section_loop, "call"),
        "perfkit timed_iter (per item)": (
            iter_loop(lambda xs: perfkit.timed_iter(xs, "it", registry=reg)),
            "iter",
        ),
    }
    rows.update(_others())
    return rows


def _others() -> dict[str, tuple[Loop, str]]:
    rows: dict[str, tuple[Loop, str]] = {}
    try:
        from codetiming import Timer

        def codetiming_with(n: int) -> None:
            for _ in range(n):
                with Timer(name="w", logger=None):
                    noop()

        rows["codetiming Timer decorator"] = (call_loop(Timer(name="d", logger=None)(noop)), "call")
        rows["codetiming Timer with"] = (codetiming_with, "call")
    except ImportError:
        pass
    try:
        from prometheus_client import CollectorRegistry, Histogram

        hist = Histogram("bench_seconds", "bench", registry=CollectorRegistry())

        def prometheus_with(n: int) -> None:
            for _ in range(n):
                with hist.time():
                    noop()

        rows["prometheus_client Histogram.time()"] = (prometheus_with, "call")
    except ImportError:
        pass
    try:
        from lightning.pytorch.profilers import SimpleProfiler

        simple = SimpleProfiler()

        def lightning_with(n: int) -> None:
            for _ in range(n):
                with simple.profile("x"):
                    noop()

        rows["Lightning SimpleProfiler.profile()"] = (lightning_with, "call")
    except ImportError:
        pass
    try:
        from torch.profiler import record_function

        def torch_with(n: int) -> None:
            for _ in range(n):
                with record_function("x"):
                    noop()

        rows["torch.profiler.record_function"] = (torch_with, "call")
    except ImportError:
        pass
    try:
        from opentelemetry.sdk.trace import TracerProvider

        tracer = TracerProvider().get_tracer("bench")

        def otel_with(n: int) -> None:
            for _ in range(n):
                with tracer.start_as_current_span("x"):
                    noop()

        rows["OpenTelemetry SDK span"] = (otel_with, "call")
    except ImportError:
        pass
    return rows


def disabled_rows() -> dict[str, tuple[Loop, str]]:
    """The entry points again, to be timed with perfkit switched off."""
    reg = perfkit.Registry()
    timed = perfkit.timed("off", registry=reg)(noop)
    section = perfkit.section

    def section_loop(k: int) -> None:
        for _ in range(k):
            with section("off", registry=reg):
                noop()

    return {
        "perfkit @timed, disabled": (call_loop(timed), "call"),
        "perfkit section, disabled": (section_loop, "call"),
        "perfkit timed_iter, disabled (per item)": (
            iter_loop(lambda xs: perfkit.timed_iter(xs, "off", registry=reg)),
            "iter",
        ),
    }


def measure(n: int, rounds: int) -> tuple[dict[str, float], float]:
    rows = candidates()
    off = disabled_rows()
    bare = {"call": call_loop(noop), "iter": iter_loop(lambda xs: xs)}
    samples: dict[str, list[float]] = {name: [] for name in [*rows, *off]}
    base: dict[str, list[float]] = {"call": [], "iter": []}
    for _ in range(rounds):  # interleaved, so drift on a shared machine hits every row alike
        for kind, loop in bare.items():
            base[kind].append(timed_loop(loop, n))
        for name, (loop, _) in rows.items():
            samples[name].append(timed_loop(loop, n))
        perfkit.disable()
        try:
            for name, (loop, _) in off.items():
                samples[name].append(timed_loop(loop, n))
        finally:
            perfkit.enable()
    middle = {kind: statistics.median(v) for kind, v in base.items()}
    kinds = {name: kind for name, (_, kind) in [*rows.items(), *off.items()]}
    over = {name: statistics.median(values) - middle[kinds[name]] for name, values in samples.items()}
    return over, middle["call"]


def threads_check(per_thread: int) -> dict[str, float]:
    """4 threads recording at once: records lost (must be 0) and aggregate rate against one thread."""
    reg = perfkit.Registry(capacity=1_000)
    timed = perfkit.timed("threads", registry=reg)(noop)
    t0 = perf_counter_ns()
    for _ in range(per_thread):
        timed()
    single_rate = per_thread / ((perf_counter_ns() - t0) / 1e9)
    reg.reset()
    workers = [threading.Thread(target=call_loop(timed), args=(per_thread,)) for _ in range(4)]
    t0 = perf_counter_ns()
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    multi_rate = 4 * per_thread / ((perf_counter_ns() - t0) / 1e9)
    lost = 4 * per_thread - reg.snapshot()["threads"].count
    return {"lost": lost, "single_rate_per_s": single_rate, "four_thread_rate_per_s": multi_rate}


def memory_check(records: int, capacity: int = 10_000) -> dict[str, float]:
    """Traced memory of a registry after ``capacity`` records and after ``records`` records."""
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    reg = perfkit.Registry(capacity=capacity)
    timed = perfkit.timed("mem", registry=reg)(noop)
    call_loop(timed)(capacity)
    reg.drain()
    small = tracemalloc.get_traced_memory()[0] - base
    call_loop(timed)(records - capacity)
    reg.drain()
    large = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    assert reg.snapshot()["mem"].count == records
    return {"records": records, "bytes_after_capacity": small, "bytes_after_all": large}


def render(over: dict[str, float], floor: float) -> str:
    width = max(map(len, over)) + 2
    lines = [f"{'entry point':<{width}}{'ns over bare':>14}{'x floor':>10}"]
    for name, ns in over.items():
        lines.append(f"{name:<{width}}{ns:>14.0f}{ns / floor:>10.2f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick", action="store_true", help="few calls: check that it runs, not a measurement"
    )
    parser.add_argument("--json", help="also write the figures to this file")
    parser.add_argument(
        "--both", action="store_true", help="then run again on the pure-Python path (PERFKIT_PURE=1)"
    )
    args = parser.parse_args(argv)
    n, rounds, per_thread, records = (
        (2_000, 2, 2_000, 20_000) if args.quick else (200_000, 7, 200_000, 10_000_000)
    )
    over, bare_call = measure(n, rounds)
    floor = over["floor: 2x perf_counter_ns + list store"]
    print(
        f"python {sys.version.split()[0]}, hot path: {perfkit.hot_path()}; bare call {bare_call:.0f} ns, "
        f"floor {floor:.0f} ns over bare; medians of {rounds} interleaved rounds\n"
    )
    print(render(over, floor))
    threads = threads_check(per_thread)
    multi, single = threads["four_thread_rate_per_s"], threads["single_rate_per_s"]
    print(
        f"\n4 threads x {per_thread} records: {threads['lost']:.0f} lost; aggregate {multi / 1e6:.2f} M/s "
        f"against {single / 1e6:.2f} M/s from one thread ({multi / single:.2f}x)"
    )
    memory = memory_check(records)
    print(
        f"memory of a capacity-10,000 registry: {memory['bytes_after_capacity'] / 1e6:.2f} MB after "
        f"10,000 records, {memory['bytes_after_all'] / 1e6:.2f} MB after {records:,}"
    )
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(
                {
                    "hot_path": perfkit.hot_path(),
                    "floor_ns": floor,
                    "over_ns": over,
                    "threads": threads,
                    "memory": memory,
                },
                fh,
                indent=2,
            )
    if args.both and "PERFKIT_PURE" not in os.environ:
        print("\n" + "-" * 80 + "\n")
        again = [a for a in (argv if argv is not None else sys.argv[1:]) if a != "--both"]
        if args.json:
            again[again.index(args.json)] = args.json.replace(".json", "") + ".pure.json"
        subprocess.run(
            [sys.executable, __file__, *again], env={**os.environ, "PERFKIT_PURE": "1"}, check=True
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
