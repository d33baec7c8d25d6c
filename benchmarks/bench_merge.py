"""Merging ranks at a stage epoch's end: today's ``all_gather_object`` against the fixed-size merge.

    python benchmarks/bench_merge.py [--ranks 2 4 8 16 32 64] [--series 12] [--steps 200] [--reps 15]

For each N, N ranks run on this machine (gloo over loopback TCP, forked processes). Each rank builds
a stage window through the real recorder path (a ``StageRecorder`` on a ``Registry`` with a fake
clock: ``--steps`` steps, each with a data wait, forward / backward / optimizer sections and hooks,
``--series`` series in all, lognormal durations), then per repetition:

- today's merge: ``perfkit.torch._ddp.gather`` of the window's ``_RankResult`` (captured from the
  recorder's own ``gather`` seam), then the ``Snapshot.merge`` of every rank's snapshot that the
  recorder does after it;
- the fixed-size merge: ``Sketch.of`` each series' samples (timed apart), then ``start_merge`` of
  the ``series x BUCKETS`` int64 counts and one float64 row per rank (wall, steps, mean step,
  samples, the account's parts), and ``Merge.result``.

Bytes: "payload" is what the rank hands to the collective (``len(pickle.dumps(obj))``, what
``all_gather_object`` pickles; the counts' and the row's bytes); "wire" is what the rank's process
wrote to its sockets during the call (``wchar`` of ``/proc/self/io``: gloo writes with ``writev``),
so it includes the collectives' own forwarding (ring or tree) and ``all_gather_object``'s
exchange of sizes. Times: per repetition the slowest rank's (the merge is done when the last rank
has it), median over repetitions. With N > 2 the ranks share 2 cores: the times are upper bounds
dominated by scheduling; the bytes do not depend on it.

The modelled rows (N = 1,024 and 8,192) are computed, not run; the model is printed with them.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import os
import pickle
import socket
import statistics
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import torch.distributed as dist

import perfkit
from perfkit._sketch import BUCKETS, Sketch
from perfkit.names import ACCOUNT_PARTS, CHECKPOINT, LOGGERS, MODULE_HOOKS
from perfkit.stages import StageRecorder
from perfkit.torch._ddp import gather, start_merge

CORE = ("train.data.wait", "train.step", "forward", "backward", "optimizer")
HOOKS = (  # (owner, kind): a Lightning fit's usual company, cycled past the first seven
    ("TQDMProgressBar", "callbacks"),
    ("LearningRateMonitor", "callbacks"),
    ("ModelCheckpoint", CHECKPOINT),
    ("on_train_batch_start", MODULE_HOOKS),
    ("on_train_batch_end", MODULE_HOOKS),
    ("CSVLogger.log_metrics", LOGGERS),
    ("EarlyStopping", "callbacks"),
)
MEDIAN_S = {"data": 2e-3, "forward": 30e-3, "backward": 60e-3, "optimizer": 8e-3, "hook": 0.2e-3}
QUANTILES = (0.5, 0.95, 0.99)
LINK_BYTES_PER_S = 10e9
STEP_LATENCY_S = 20e-6
MODEL_RANKS = (1024, 8192)


class FakeClock:
    """Integer nanoseconds that move only when told (the registry's clock seam)."""

    def __init__(self) -> None:
        self.now = 1_000_000_000

    def __call__(self) -> int:
        return self.now

    def spend(self, seconds: float) -> tuple[int, int]:
        t0 = self.now
        self.now += max(1, round(seconds * 1e9))
        return t0, self.now


def hooks(series: int) -> list[tuple[str, str]]:
    """The ``series - 5`` hook owners of a window, cycling through ``HOOKS`` with new names."""
    return [(f"{o}{k // len(HOOKS) or ''}", kind) for k, (o, kind) in enumerate(HOOKS * series)][
        : series - len(CORE)
    ]


def build_window(rank: int, rep: int, series: int, steps: int) -> Any:
    """One training epoch's ``_RankResult`` of ``rank``, made by the recorder, as ``gather`` gets it."""
    rng = np.random.default_rng([rank, rep])
    slow = 1.3 if rank % 7 == 3 else 1.0  # a few slower ranks, so the merged tail is theirs
    clock = FakeClock()
    reg = perfkit.Registry(clock=clock, capacity=max(steps, 1000))
    captured: list[Any] = []

    def capture(obj: Any) -> list[Any]:  # the recorder's seam: what it would hand to ``gather``
        captured.append(obj)
        return [obj]

    rec = StageRecorder(reg, gather=capture)
    owners = hooks(series)

    def draw(part: str) -> float:
        return float(rng.lognormal(math.log(MEDIAN_S[part] * slow), 0.25))

    rec.begin("train", 0)
    for _ in range(steps):
        rec.record("train", "train.data.wait", *clock.spend(draw("data")))
        for owner, kind in owners:
            rec.hook(owner, *clock.spend(draw("hook")), kind=kind)
        rec.step_begin("train")
        for part in ("forward", "backward", "optimizer"):
            with perfkit.section(part, registry=reg):
                clock.spend(draw(part))
        rec.step_end("train")
        rec.add_samples("train", 32)
    rec.end("train")
    return captured[0]


def sketch_counts(obj: Any) -> np.ndarray[Any, np.dtype[np.int64]]:
    """Every series' sketch of its samples (seconds), series in name order: ``series x BUCKETS``."""
    snap = obj.snapshot
    return np.stack([Sketch.of(snap.data(name).durations_ns / 1e9).counts for name in sorted(snap)])


def row_of(obj: Any) -> np.ndarray[Any, np.dtype[np.float64]]:
    """The rank's fixed-length row: wall, steps, mean step, samples, then each account part."""
    head = [obj.wall_s, obj.steps, obj.step_mean_s, obj.samples or 0]
    return np.array(head + [obj.account.seconds(p) for p in ACCOUNT_PARTS], dtype=np.float64)


def wchar() -> int:
    with open("/proc/self/io") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("wchar:"))


def timed(fn: Any) -> tuple[Any, float, int]:
    """``fn()``, its wall seconds and the bytes this process wrote meanwhile (after a barrier)."""
    dist.barrier()
    w0, t0 = wchar(), time.perf_counter()
    out = fn()
    t1, w1 = time.perf_counter(), wchar()
    return out, t1 - t0, w1 - w0


def one_rep(rank: int, rep: int, args: argparse.Namespace) -> tuple[dict[str, float], Any]:
    obj = build_window(rank, rep, args.series, args.steps)
    t0 = time.perf_counter()
    counts = sketch_counts(obj)
    sketch_s = time.perf_counter() - t0
    row = row_of(obj)
    ranks, gather_s, gather_wire = timed(lambda: gather(obj))
    t0 = time.perf_counter()
    ranks[0].snapshot.merge(*(r.snapshot for r in ranks[1:]))
    merge_s = time.perf_counter() - t0
    merged, fixed_s, fixed_wire = timed(lambda: start_merge(counts, row).result(args.timeout))
    figures = {
        "today_payload": len(pickle.dumps(obj)),
        "today_wire": gather_wire,
        "today_s": gather_s,
        "today_merge_s": merge_s,
        "fixed_payload": counts.nbytes + row.nbytes,
        "fixed_wire": fixed_wire,
        "fixed_s": fixed_s,
        "sketch_s": sketch_s,
    }
    return figures, (ranks, merged)


def accuracy(ranks: list[Any], sums: np.ndarray[Any, np.dtype[np.int64]]) -> float:
    """The largest relative error of the summed sketches' p50/p95/p99 against the exact ones over
    every rank's samples, over all series."""
    worst = 0.0
    for i, name in enumerate(sorted(ranks[0].snapshot)):
        every = np.concatenate([r.snapshot.data(name).durations_ns for r in ranks]) / 1e9
        for q in QUANTILES:
            exact = float(np.quantile(every, q, method="lower"))
            worst = max(worst, abs(Sketch(sums[i]).quantile(q) - exact) / exact)
    return worst


def rank_main(rank: int, world: int, port: int, args: argparse.Namespace, out: str) -> None:
    os.environ["OMP_NUM_THREADS"] = "1"
    dist.init_process_group(
        "gloo",
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=world,
        timeout=timedelta(seconds=600),
    )
    reps = []
    for rep in range(args.warmup + reps_for(world, args)):
        figures, (ranks, merged) = one_rep(rank, rep, args)
        if rep >= args.warmup:
            reps.append(figures)
    error = accuracy(ranks, merged[0]) if rank == 0 and merged is not None else None
    everyone = gather(reps)
    if rank == 0:
        Path(out).write_text(json.dumps({"reps": everyone, "error": error, "series": len(ranks[0].snapshot)}))
    dist.barrier()
    dist.destroy_process_group()


def reps_for(world: int, args: argparse.Namespace) -> int:
    """Fewer repetitions for many ranks (each costs N oversubscribed processes' time)."""
    reps: int = args.reps
    return max(5, min(reps, reps * 8 // world))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run_ranks(world: int, args: argparse.Namespace) -> dict[str, Any]:
    """Start ``world`` forked ranks and return rank 0's figures (per rank, per repetition)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = str(Path(tmp) / "figures.json")
        port, fork = free_port(), multiprocessing.get_context("fork")
        ranks = [fork.Process(target=rank_main, args=(r, world, port, args, out)) for r in range(world)]
        for p in ranks:
            p.start()
        for p in ranks:
            p.join()
        failed = [r for r, p in enumerate(ranks) if p.exitcode != 0]
        if failed:
            raise RuntimeError(f"N = {world}: ranks {failed} failed (exit codes above)")
        result: dict[str, Any] = json.loads(Path(out).read_text())
        return result


def summarise(world: int, result: dict[str, Any]) -> dict[str, float]:
    """Per figure: bytes as the median rank's median, times as the median over reps of the slowest rank."""
    per_rank: list[list[dict[str, float]]] = result["reps"]
    keys = per_rank[0][0].keys()
    reps = len(per_rank[0])
    line: dict[str, float] = {"ranks": world, "reps": reps, "error": result["error"] or 0.0}
    line["series"] = result["series"]
    for key in keys:
        if key.endswith("_s"):
            line[key] = statistics.median(max(r[i][key] for r in per_rank) for i in range(reps))
        else:
            line[key] = statistics.median(statistics.median(r[i][key] for i in range(reps)) for r in per_rank)
    return line


def sketch_s(args: argparse.Namespace, reps: int = 21) -> float:
    """Median seconds of one window's ``sketch_counts``, in this one process (no other rank running)."""
    obj = build_window(0, 0, args.series, args.steps)
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        sketch_counts(obj)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def receive_cpu(args: argparse.Namespace, distinct: int = 32) -> dict[int, tuple[float, float]]:
    """Per modelled N: seconds to unpickle N received windows and to merge their snapshots, measured
    in this one process on N copies of ``distinct`` ranks' windows (what each rank does today)."""
    blobs = [pickle.dumps(build_window(r, 0, args.series, args.steps)) for r in range(distinct)]
    out: dict[int, tuple[float, float]] = {}
    for n in MODEL_RANKS:
        t0 = time.perf_counter()
        objs = [pickle.loads(blobs[i % distinct]) for i in range(n)]
        unpickle = time.perf_counter() - t0
        t0 = time.perf_counter()
        objs[0].snapshot.merge(*(o.snapshot for o in objs[1:]))
        out[n] = unpickle, time.perf_counter() - t0
        del objs
    return out


def wire_check(lines: list[dict[str, float]], series: int) -> None:
    """The model's wire bytes at the measured N, beside the measured ones."""
    counts, row = series * BUCKETS * 8.0, 8.0 * (4 + len(ACCOUNT_PARTS))
    print("\nwire sent per rank, measured / modelled (ring: (N-1) w; 2(N-1)/N C + (N-1) r):")
    for x in lines:
        n = x["ranks"]
        today, fixed = (n - 1) * x["today_payload"], 2 * (n - 1) / n * counts + (n - 1) * row
        print(
            f"  N={n:.0f}: today {kb(x['today_wire'])} / {kb(today)}; "
            f"fixed {kb(x['fixed_wire'])} / {kb(fixed)}"
        )


def kb(n: float) -> str:
    return f"{n / 1e3:,.1f} kB" if n < 1e6 else f"{n / 1e6:,.1f} MB"


def ms(s: float) -> str:
    return f"{s * 1e3:,.1f}"


def measured_table(lines: list[dict[str, float]]) -> None:
    print(
        "| N | reps | today: payload | wire sent | gather ms | + Snapshot.merge ms "
        "| fixed: payload | wire sent | start_merge+result ms | Sketch.of ms |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for x in lines:
        print(
            f"| {x['ranks']:.0f} | {x['reps']:.0f} | {kb(x['today_payload'])} | {kb(x['today_wire'])} "
            f"| {ms(x['today_s'])} | {ms(x['today_merge_s'])} | {kb(x['fixed_payload'])} "
            f"| {kb(x['fixed_wire'])} | {ms(x['fixed_s'])} | {ms(x['sketch_s'])} |"
        )


def modelled_table(
    line: dict[str, float], series: int, cpu: dict[int, tuple[float, float]], sketch: float
) -> None:
    """Bytes and time at ``MODEL_RANKS`` from the measured per-rank payloads (see the printed model)."""
    w, row = line["today_payload"], 8.0 * (4 + len(ACCOUNT_PARTS))
    counts = series * BUCKETS * 8.0
    print(
        f"\nmodel: window w = {kb(w)} (measured), counts C = {kb(counts)}, row r = {row:.0f} B; "
        f"link {LINK_BYTES_PER_S / 1e9:.0f} GB/s, {STEP_LATENCY_S * 1e6:.0f} us per collective step, "
        "log2(N) steps per collective (recursive doubling; all_reduce: reduce-scatter + all-gather, "
        "2 log2(N) steps, 2(N-1)/N C on the wire); today's time adds the receive CPU measured here "
        "in one process (unpickling N windows, merging N snapshots); the fixed-size time adds "
        f"Sketch.of ({ms(sketch)} ms, measured here in one process)"
    )
    for n, (unpickle_s, merge_s) in cpu.items():
        print(f"  receive CPU at N={n:,}: unpickle {unpickle_s:.2f} s, Snapshot.merge {merge_s:.2f} s")
    print(
        "| N | today: sends (wire) | receives | time s | fixed: sends (wire) | receives | time ms |\n"
        "|---:|---:|---:|---:|---:|---:|---:|"
    )
    for n in MODEL_RANKS:
        steps = math.ceil(math.log2(n))
        today_wire = (n - 1) * w
        today_s = steps * STEP_LATENCY_S + today_wire / LINK_BYTES_PER_S + sum(cpu[n])
        fixed_wire = 2 * (n - 1) / n * counts + (n - 1) * row
        fixed_s = 3 * steps * STEP_LATENCY_S + fixed_wire / LINK_BYTES_PER_S + sketch
        print(
            f"| {n:,} | {kb(today_wire)} | {kb(n * w)} | {today_s:,.2f} | {kb(fixed_wire)} "
            f"| {kb(counts + n * row)} | {ms(fixed_s)} |"
        )
    ring = ", ".join(
        f"N={n:,}: +{(n - 1) * STEP_LATENCY_S:.2f} s today, +{3 * (n - 1) * STEP_LATENCY_S:.2f} s fixed-size"
        for n in MODEL_RANKS
    )
    print(
        f"with ring collectives instead ((N-1) steps each, 2(N-1) for all_reduce: what gloo ran here): {ring}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, nargs="+", default=[2, 4, 8, 16, 32, 64])
    parser.add_argument("--series", type=int, default=12, help="series per window (at least 5)")
    parser.add_argument("--steps", type=int, default=200, help="steps (samples per series) per epoch")
    parser.add_argument("--reps", type=int, default=15, help="repetitions at N <= 8 (fewer above)")
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=300.0, help="Merge.result's timeout, s")
    args = parser.parse_args(argv)
    if args.series < len(CORE):
        parser.error(f"--series must be at least {len(CORE)}")
    lines = []
    for world in args.ranks:
        t0 = time.perf_counter()
        lines.append(summarise(world, run_ranks(world, args)))
        print(f"N = {world}: {time.perf_counter() - t0:.1f} s", file=sys.stderr, flush=True)
    print(
        f"{lines[0]['series']:.0f} series x {args.steps} samples per rank per epoch; "
        f"BUCKETS = {BUCKETS}; {os.cpu_count()} cores\n"
    )
    measured_table(lines)
    errors = ", ".join(f"N={x['ranks']:.0f}: {x['error'] * 100:.3f}%" for x in lines)
    print(f"\nfixed-size merge, largest relative error of p50/p95/p99 over all series: {errors}")
    wire_check(lines, args.series)
    modelled_table(lines[-1], args.series, receive_cpu(args), sketch_s(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
