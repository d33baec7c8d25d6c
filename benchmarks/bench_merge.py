"""Merging ranks at a stage epoch's end: the plain ``all_gather_object`` against ``perfkit``'s merge.

    python benchmarks/bench_merge.py [--ranks 2 4 8 16 32 64] [--series 12] [--steps 200] [--reps 15]

For each N, N ranks run on this machine (gloo over loopback TCP, forked processes). Each rank builds
a stage window through the real recorder path (a ``StageRecorder`` on a ``Registry`` with a fake
clock: ``--steps`` steps, each with a data wait, forward / backward / optimizer sections and hooks,
``--series`` series in all, lognormal durations) and captures the ``RankResult`` the recorder hands
to its merge, then per repetition merges it the three ways ``StageRecorder._merge`` can:

- (a) today's form, a plain callable ``gather``: ``TorchRanks()(result)`` (one ``all_gather_object``
  of every rank's whole result), then the ``Snapshot.merge`` of every rank's snapshot;
- (b) ``merge(result, TorchRanks(exact_max=8))``, the default: an agree round (``all_gather`` of a
  6-int64 row), then up to 8 ranks an ``all_gather`` of every rank's pickled result (exact), above
  it the fixed-size exchange;
- (c) ``merge(result, TorchRanks(exact_max=1))``: the fixed-size exchange at every N (agree row;
  ``all_reduce`` SUM of per key [count, total, errors] + sketch counts, ``all_reduce`` MIN,
  ``all_reduce`` SUM of floats, ``all_gather`` of one float64 row per rank, ``broadcast`` of the
  3 slowest ranks' pickled details).

Bytes: "payload" is what the rank hands to the collectives (``len(pickle.dumps(result))`` for (a),
what ``all_gather_object`` pickles; for (b) and (c) the agree row plus the pickled result or the
fixed vectors and row; a details blob is sent by its source rank only). "wire" is what the rank's
process wrote to its sockets during the call (``wchar`` of ``/proc/self/io``: gloo writes with
``writev``), so it includes the collectives' own forwarding (ring or tree), ``all_gather_object``'s
exchange of sizes and the store writes that mark each round. Times: per repetition the slowest
rank's (the merge is done when the last rank has it), median over repetitions. With N > 2 the ranks
share 2 cores: the times are upper bounds dominated by scheduling; the bytes do not depend on it.

The check: rank 0 compares the merged snapshot's p50/p95/p99 (``snapshot[name].median_s`` etc.) of
(b) and (c), every series, with the exact ones over all ranks' samples (from (a)).

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
from collections.abc import Sequence
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import torch.distributed as dist

import perfkit
from perfkit.names import CHECKPOINT, LOGGERS, MODULE_HOOKS
from perfkit.stages import TOP_K, Merged, RankResult, StageRecorder
from perfkit.stages import merge_ranks as merge
from perfkit.torch import TorchRanks

I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]

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
PERCENTILES = (("p50", "median_s", 50.0), ("p95", "p95_s", 95.0), ("p99", "p99_s", 99.0))
AGREE_BYTES = 6 * 8  # the agree round's row: 6 int64
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


def build_window(rank: int, rep: int, series: int, steps: int) -> RankResult:
    """One training epoch's ``RankResult`` of ``rank``, made by the recorder, as its merge gets it."""
    rng = np.random.default_rng([rank, rep])
    slow = 1.3 if rank % 7 == 3 else 1.0  # a few slower ranks, so the merged tail is theirs
    clock = FakeClock()
    reg = perfkit.Registry(clock=clock, capacity=max(steps, 1000))
    captured: list[RankResult] = []

    def capture(obj: RankResult) -> list[RankResult]:  # the recorder's seam: what it would merge
        captured.append(obj)
        return [obj]

    rec = StageRecorder(reg, gather=capture, rank=rank)
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


def details(mine: RankResult) -> bytes:
    """What a slowest rank broadcasts in the fixed-size form: its result without the snapshot."""
    return pickle.dumps(replace(mine, snapshot=None), protocol=pickle.HIGHEST_PROTOCOL)


def fixed_vectors(mine: RankResult) -> tuple[I64, I64, F64, F64]:
    """The fixed-size form's vectors (sums, mins, float sums) and row, as the merge hands them to
    its transport (caught by a local one)."""
    caught = LocalRanks(TOP_K + 1)  # the fixed-size form needs more ranks than exact_max=1
    merge(mine, caught)
    assert caught.vectors is not None
    return caught.vectors


def fixed_bytes(mine: RankResult) -> tuple[int, int]:
    """The fixed-size form's vectors (sums, mins, float sums) and row, in bytes."""
    sums, mins, fsums, row = fixed_vectors(mine)
    return sums.nbytes + mins.nbytes + fsums.nbytes, row.nbytes


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


def one_rep(
    mine: RankResult, default: TorchRanks, fixed: TorchRanks
) -> tuple[dict[str, float], tuple[list[RankResult], Merged, Merged]]:
    ranks, gather_s, gather_wire = timed(lambda: TorchRanks()(mine))
    t0 = time.perf_counter()
    ranks[0].snapshot.merge(*(r.snapshot for r in ranks[1:]))
    merge_s = time.perf_counter() - t0
    by_default, default_s, default_wire = timed(lambda: merge(mine, default))
    by_fixed, fixed_s, fixed_wire = timed(lambda: merge(mine, fixed))
    assert by_default is not None, "a merge timed out"
    assert by_fixed is not None, "a merge timed out"
    figures = {
        "today_wire": gather_wire,
        "today_s": gather_s,
        "today_merge_s": merge_s,
        "default_wire": default_wire,
        "default_s": default_s,
        "fixed_wire": fixed_wire,
        "fixed_s": fixed_s,
    }
    return figures, (ranks, by_default, by_fixed)


def accuracy(ranks: list[RankResult], merged: Merged) -> dict[str, float]:
    """Per percentile, the largest relative error over all series of the merged snapshot's figure
    against the exact one over every rank's samples."""
    snap = merged.snapshot
    worst = {label: 0.0 for label, _, _ in PERCENTILES}
    for name in ranks[0].snapshot or ():
        every = np.concatenate([r.snapshot.data(name).durations_ns for r in ranks if r.snapshot]) / 1e9
        for label, field, q in PERCENTILES:
            exact = float(np.percentile(every, q))
            got = float(getattr(snap[name], field))
            worst[label] = max(worst[label], abs(got - exact) / exact)
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
    default, fixed = TorchRanks(args.timeout, exact_max=8), TorchRanks(args.timeout, exact_max=1)
    reps: list[dict[str, float]] = []
    errors: dict[str, dict[str, float]] = {}
    for rep in range(args.warmup + reps_for(world, args)):
        mine = build_window(rank, rep, args.series, args.steps)
        figures, (ranks, by_default, by_fixed) = one_rep(mine, default, fixed)
        if rep >= args.warmup:
            vectors, row = fixed_bytes(mine)
            figures |= {
                "today_payload": len(pickle.dumps(mine)),
                "exact_payload": AGREE_BYTES + len(pickle.dumps(mine, protocol=pickle.HIGHEST_PROTOCOL)),
                "fixed_payload": AGREE_BYTES + vectors + row,
                "vectors": vectors,
                "row": row,
                "details": len(details(mine)),
            }
            reps.append(figures)
    if rank == 0:
        errors = {"default": accuracy(ranks, by_default), "fixed": accuracy(ranks, by_fixed)}
    everyone = TorchRanks()(reps)
    if rank == 0:
        assert mine.snapshot is not None
        sums, mins, _, floats = fixed_vectors(mine)
        series, keys = len(mine.snapshot), len(mins) // 2  # min and -max per key
        buckets = (len(sums) - 3 * keys) // series  # a series' slot is its 3 totals and its sketch
        shape = {"series": series, "keys": keys, "buckets": buckets, "row_floats": len(floats)}
        Path(out).write_text(json.dumps({"reps": everyone, "errors": errors, **shape}))
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


def summarise(world: int, result: dict[str, Any]) -> dict[str, Any]:
    """Per figure: bytes as the median rank's median (and the mean over ranks), times as the median
    over reps of the slowest rank."""
    per_rank: list[list[dict[str, float]]] = result["reps"]
    keys = per_rank[0][0].keys()
    reps = len(per_rank[0])
    line: dict[str, Any] = {"ranks": world, "reps": reps, "errors": result["errors"]}
    for shape in ("series", "keys", "buckets", "row_floats"):
        line[shape] = result[shape]
    for key in keys:
        if key.endswith("_s"):
            line[key] = statistics.median(max(r[i][key] for r in per_rank) for i in range(reps))
        else:
            medians = [statistics.median(r[i][key] for i in range(reps)) for r in per_rank]
            line[key], line[key + "_mean"] = statistics.median(medians), statistics.mean(medians)
    return line


class LocalRanks:
    """A ``Ranks`` transport in one process that answers as ``world`` ranks would: every rank's row
    is this one's (three of them the slowest, so three details are unpickled), the sums are
    ``world`` times this rank's. It times the fixed-size merge's own CPU, without a network."""

    timeout_s = 300.0
    exact_max = 1

    def __init__(self, world: int) -> None:
        self.n = world
        self.vectors: tuple[I64, I64, F64, F64] | None = None  # what the last exchange was handed

    def world(self) -> int:
        return self.n

    def rank(self) -> int:
        return 0

    def all_gather_ints(self, row: I64) -> I64 | None:
        agreed = np.tile(row, (self.n, 1))
        for r, column in zip(range(1, TOP_K + 1), (3, 4, 5), strict=True):
            agreed[r, column] += 1
        return agreed

    def all_gather_bytes(self, blob: bytes, sizes: Sequence[int]) -> list[bytes] | None:
        return [blob] * len(sizes)

    def exchange(
        self, sums: I64, mins: I64, fsums: F64, row: F64, blob: bytes, sources: dict[int, int]
    ) -> tuple[I64, I64, F64, F64, dict[int, bytes]] | None:
        self.vectors = sums, mins, fsums, row
        return sums * self.n, mins, fsums * self.n, np.tile(row, (self.n, 1)), dict.fromkeys(sources, blob)

    def missing(self) -> tuple[int, ...]:
        return ()


def local_cpu(
    args: argparse.Namespace, distinct: int = 32, reps: int = 5
) -> dict[int, tuple[float, float, float]]:
    """Per modelled N, measured in this one process: seconds to unpickle N received results and to
    merge their snapshots (what each rank does in today's form, on N copies of ``distinct`` ranks'
    results), and the fixed-size ``merge``'s own CPU (``LocalRanks``, median of ``reps``)."""
    results = [build_window(r, 0, args.series, args.steps) for r in range(distinct)]
    blobs = [pickle.dumps(r) for r in results]
    out: dict[int, tuple[float, float, float]] = {}
    for n in MODEL_RANKS:
        t0 = time.perf_counter()
        objs = [pickle.loads(blobs[i % distinct]) for i in range(n)]
        unpickle = time.perf_counter() - t0
        t0 = time.perf_counter()
        objs[0].snapshot.merge(*(o.snapshot for o in objs[1:]))
        snapshot_merge = time.perf_counter() - t0
        del objs
        times = []
        for _ in range(reps):
            t0 = time.perf_counter()
            merge(results[0], LocalRanks(n))
            times.append(time.perf_counter() - t0)
        out[n] = unpickle, snapshot_merge, statistics.median(times)
    return out


def fixed_model(n: int, x: dict[str, Any]) -> float:
    """Bytes a rank sends in the fixed-size form, on average over ranks (rings; trees for the
    broadcasts: each of the ``TOP_K`` details reaches N - 1 ranks, sent once for each)."""
    reduce = 2 * (n - 1) / n * x["vectors"]
    sends: float = (n - 1) * AGREE_BYTES + reduce + (n - 1) * x["row"] + TOP_K * (n - 1) / n * x["details"]
    return sends


def wire_check(lines: list[dict[str, Any]]) -> None:
    """The model's wire bytes at the measured N, beside the measured ones (mean over ranks)."""
    print(
        "\nwire sent per rank, mean over ranks, measured / modelled "
        "(rings: today (N-1) w; exact (N-1)(a + p); fixed (N-1) a + 2(N-1)/N V + (N-1) r + 3 (N-1)/N d):"
    )
    for x in lines:
        n = x["ranks"]
        today = (n - 1) * x["today_payload"]
        exact = (n - 1) * x["exact_payload"]
        default = exact if n <= 8 else fixed_model(n, x)
        print(
            f"  N={n}: (a) {kb(x['today_wire_mean'])} / {kb(today)}; "
            f"(b) {kb(x['default_wire_mean'])} / {kb(default)}; "
            f"(c) {kb(x['fixed_wire_mean'])} / {kb(fixed_model(n, x))}"
        )


def kb(n: float) -> str:
    return f"{n / 1e3:,.1f} kB" if n < 1e6 else f"{n / 1e6:,.1f} MB"


def ms(s: float) -> str:
    return f"{s * 1e3:,.1f}"


def measured_table(lines: list[dict[str, Any]]) -> None:
    print(
        "| N | reps | (a) gather: payload | wire sent | gather ms | + Snapshot.merge ms "
        "| (b) merge, exact_max=8: form | payload | wire sent | ms "
        "| (c) merge, exact_max=1: payload | wire sent | ms |"
    )
    print("|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|")
    for x in lines:
        exact = x["ranks"] <= 8
        print(
            f"| {x['ranks']} | {x['reps']} | {kb(x['today_payload'])} | {kb(x['today_wire'])} "
            f"| {ms(x['today_s'])} | {ms(x['today_merge_s'])} | {'exact' if exact else 'fixed'} "
            f"| {kb(x['exact_payload'] if exact else x['fixed_payload'])} | {kb(x['default_wire'])} "
            f"| {ms(x['default_s'])} | {kb(x['fixed_payload'])} | {kb(x['fixed_wire'])} "
            f"| {ms(x['fixed_s'])} |"
        )


def modelled_table(line: dict[str, Any], cpu: dict[int, tuple[float, float, float]]) -> None:
    """Bytes and time at ``MODEL_RANKS`` from the measured per-rank payloads (see the printed model)."""
    w, v, r, d = line["today_payload"], line["vectors"], line["row"], line["details"]
    print(
        f"\nmodel: result w = {kb(w)} (pickled, measured); fixed form: agree row a = {AGREE_BYTES} B, "
        f"vectors V = {kb(v)} (per series 3 + {line['buckets']} int64, per tree path 3; per key 2 int64 "
        "mins and 1 float64), "
        f"row r = {r:.0f} B, details d = {kb(d)} ({TOP_K} broadcast); "
        f"link {LINK_BYTES_PER_S / 1e9:.0f} GB/s, {STEP_LATENCY_S * 1e6:.0f} us per collective step, "
        "log2(N) steps per collective (recursive doubling / binomial tree; all_reduce: reduce-scatter "
        "+ all-gather, 2 log2(N) steps, 2(N-1)/N V on the wire), run one after another: today 1 "
        "collective; fixed agree + 3 all_reduce + all_gather + 3 broadcasts = 11 log2(N) steps; "
        "today's time adds the receive CPU measured here in one process (unpickling N results, "
        "merging N snapshots); the fixed-size time adds merge()'s own CPU measured here in one process "
        "with a local transport answering as N ranks (packing and sketching, unpacking, N rows, 3 details)"
    )
    for n, (unpickle_s, merge_s, fixed_cpu) in cpu.items():
        print(
            f"  CPU at N={n:,}: today unpickle {unpickle_s:.2f} s + Snapshot.merge {merge_s:.2f} s; "
            f"fixed merge() {ms(fixed_cpu)} ms"
        )
    print(
        "| N | today: sends (wire) | receives | time s | fixed: sends (wire) | receives | time ms |\n"
        "|---:|---:|---:|---:|---:|---:|---:|"
    )
    for n in MODEL_RANKS:
        steps = math.ceil(math.log2(n))
        today_wire = (n - 1) * w
        today_s = steps * STEP_LATENCY_S + today_wire / LINK_BYTES_PER_S + cpu[n][0] + cpu[n][1]
        fixed_wire = fixed_model(n, line)
        fixed_receives = n * AGREE_BYTES + v + n * r + TOP_K * d
        fixed_s = 11 * steps * STEP_LATENCY_S + fixed_wire / LINK_BYTES_PER_S + cpu[n][2]
        print(
            f"| {n:,} | {kb(today_wire)} | {kb(n * w)} | {today_s:,.2f} | {kb(fixed_wire)} "
            f"| {kb(fixed_receives)} | {ms(fixed_s)} |"
        )
    ring = ", ".join(
        f"N={n:,}: +{(n - 1) * STEP_LATENCY_S:.2f} s today, +{11 * (n - 1) * STEP_LATENCY_S:.2f} s fixed-size"
        for n in MODEL_RANKS
    )
    print(f"with ring collectives instead ((N-1) steps each, 2(N-1) for all_reduce): {ring}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, nargs="+", default=[2, 4, 8, 16, 32, 64])
    parser.add_argument("--series", type=int, default=12, help="series per window (at least 5)")
    parser.add_argument("--steps", type=int, default=200, help="steps (samples per series) per epoch")
    parser.add_argument("--reps", type=int, default=15, help="repetitions at N <= 8 (fewer above)")
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=300.0, help="TorchRanks' timeout_s")
    args = parser.parse_args(argv)
    if args.series < len(CORE):
        parser.error(f"--series must be at least {len(CORE)}")
    lines = []
    for world in args.ranks:
        t0 = time.perf_counter()
        lines.append(summarise(world, run_ranks(world, args)))
        print(f"N = {world}: {time.perf_counter() - t0:.1f} s", file=sys.stderr, flush=True)
    first = lines[0]
    print(
        f"{first['series']} series ({first['keys']} keys with the tree's paths) x {args.steps} samples "
        f"per rank per epoch; BUCKETS = {first['buckets']}; row = {first['row_floats']} float64; "
        f"{os.cpu_count()} cores\n"
    )
    measured_table(lines)
    print(
        "\nmerged p50 / p95 / p99 against exact over all ranks' samples, "
        "largest relative error over all series:"
    )
    for x in lines:
        e = x["errors"]
        print(
            f"  N={x['ranks']}: "
            + "; ".join(
                f"({k}) " + " / ".join(f"{e[name][label] * 100:.3f}%" for label, _, _ in PERCENTILES)
                for k, name in (("b", "default"), ("c", "fixed"))
            )
        )
    wire_check(lines)
    modelled_table(lines[-1], local_cpu(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
