"""Recursion under ``@timed``: the cost per record at depth 1, 100 and 3,000, and what a window of
deep recursion costs to snapshot, print and summarise.

    python benchmarks/bench_recursion.py [--rounds 7] [--records 30000]

Per record: a recursive function decorated with ``@timed`` called to each depth, against the same
function bare and under a pass-through decorator at the same depth (deep Python recursion through
any wrapper costs more per level than a flat call: the C stack grows with it). Nanoseconds per
call, medians of interleaved rounds of about ``--records`` calls each; the ``@timed`` rows include
each record's share of the drain. Then one window of three calls 3,000 deep, as the issue's user
had it: the snapshot, ``perfkit.report``'s time and size, and ``perfkit summary`` / ``perfkit
report`` on its run directory.
"""

from __future__ import annotations

import argparse
import functools
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import perfkit
from perfkit.run import RunWriter

DEPTHS = (1, 100, 3000)


def passing(fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return fn(*args, **kwargs)

    return wrapper


def bare(n: int) -> int:
    return 0 if n == 0 else bare(n - 1) + 1


@passing
def passed(n: int) -> int:
    return 0 if n == 0 else passed(n - 1) + 1


@perfkit.timed("walk")
def walk(n: int) -> int:
    return 0 if n == 0 else walk(n - 1) + 1


def per_call_ns(fn: Callable[[int], int], depth: int, records: int) -> float:
    calls = max(1, records // (depth + 1))
    fn(depth)
    t0 = time.perf_counter_ns()
    for _ in range(calls):
        fn(depth)
    return (time.perf_counter_ns() - t0) / (calls * (depth + 1))


def per_record(rounds: int, records: int) -> None:
    print(f"ns per call ({perfkit.hot_path()}), medians of {rounds} interleaved rounds of ~{records:,} calls")
    print(f"{'depth':>6} {'bare':>8} {'pass-through':>13} {'@timed':>8} {'@timed - pass-through':>22}")
    for depth in DEPTHS:
        got: dict[str, list[float]] = {"bare": [], "passed": [], "timed": []}
        for _ in range(rounds):
            got["bare"].append(per_call_ns(bare, depth, records))
            got["passed"].append(per_call_ns(passed, depth, records))
            got["timed"].append(per_call_ns(walk, depth, records))
        b, p, t = (statistics.median(got[k]) for k in ("bare", "passed", "timed"))
        print(f"{depth:>6} {b:>8.0f} {p:>13.0f} {t:>8.0f} {t - p:>+22.0f}")


def one_window(depth: int, path: Path) -> None:
    reg = perfkit.Registry()
    run = RunWriter(path)
    with perfkit.use_registry(reg):
        start = reg.cursor()
        t0 = time.perf_counter()
        with perfkit.window("train", epoch=0, run=run, console=False):
            for _ in range(3):
                walk(depth)
        window_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        snap = reg.snapshot(since=start)
        snapshot_s = time.perf_counter() - t0
        perfkit.report(perfkit.Registry().snapshot())  # the renderer's import, not timed
        t0 = time.perf_counter()
        text = perfkit.report(snap)
        report_s = time.perf_counter() - t0
        run.finish(reg.snapshot())
    print(f"one window, 3 calls {depth:,} deep: the window {window_s:.3f} s (its end included)")
    print(f"  snapshot {snapshot_s * 1e3:.1f} ms; perfkit.report {report_s * 1e3:.1f} ms,")
    print(f"  {len(text.splitlines())} lines, {len(text.encode()):,} bytes", end="")
    lines = text.splitlines()
    print(":\n" + "\n".join("    " + line for line in lines) if len(lines) <= 20 else " (not shown)")
    for command in ("summary", "report"):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "perfkit", command, str(path)], check=True, capture_output=True)
        took = time.perf_counter() - t0
        print(f"  perfkit {command} RUN_DIR: {took:.2f} s (a new process, imports included)")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--records", type=int, default=30_000)
    args = parser.parse_args()
    sys.setrecursionlimit(20_000)
    per_record(args.rounds, args.records)
    with tempfile.TemporaryDirectory() as tmp:
        one_window(3000, Path(tmp) / "run")


if __name__ == "__main__":
    main()
