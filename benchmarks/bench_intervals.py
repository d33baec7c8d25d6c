"""Interval windows: the per-step cost with intervals on, and a run directory's size after a long run.

    python benchmarks/bench_intervals.py [--steps 1000000] [--every 1000]

Per-step cost: ``step_begin`` + ``step_end`` of a ``StageRecorder`` with no intervals, and with
intervals cut every ``--every`` steps and published by a ``StageMonitor`` to a run directory
(metrics, verdicts, CHANGE, the line written), over the same steps; the difference per step is
what intervals cost. Size: a simulated run of ``--steps`` steps in one epoch (a step-based run),
the run directory's bytes and ``intervals.jsonl``'s lines at the end (bounded by merging).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import perfkit
from perfkit.monitor import StageMonitor
from perfkit.run import RunWriter, read_run
from perfkit.stages import Intervals, StageRecorder


def run(steps: int, every: int | None, path: Path) -> float:
    reg = perfkit.Registry()
    listeners = (
        [] if every is None else [StageMonitor(say=lambda text: None, sinks=[RunWriter(path)], console=False)]
    )
    rec = StageRecorder(reg, top_k_slowest=0, listeners=listeners)
    rec.begin("train", 0, intervals=None if every is None else Intervals(steps=every, always=True))
    t0 = time.perf_counter()
    for _ in range(steps):
        rec.step_begin("train")
        rec.step_end("train")
    elapsed = time.perf_counter() - t0
    rec.end("train")
    return elapsed / steps


def size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=1_000_000)
    parser.add_argument("--every", type=int, default=1000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        off = run(args.steps, None, Path(tmp) / "off")
        on = run(args.steps, args.every, Path(tmp) / "on")
        lines = read_run(Path(tmp) / "on").intervals
        n = args.steps // args.every
        print(f"steps {args.steps:,}, an interval every {args.every:,} steps ({n:,} intervals)")
        print(
            f"per step: {off * 1e6:.2f} us without intervals, {on * 1e6:.2f} us with them "
            f"(+{(on - off) * 1e6:.2f} us)"
        )
        print(
            f"run directory: {size(Path(tmp) / 'on') / 1e6:.2f} MB; intervals.jsonl {len(lines)} lines, "
            f"{sum(x.merged for x in lines):,} intervals in them; pid {os.getpid()}"
        )


if __name__ == "__main__":
    main()
