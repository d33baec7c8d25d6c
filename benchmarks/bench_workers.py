"""What a record made in a DataLoader worker costs, against one made in the main process.

    python benchmarks/bench_workers.py [--records 200000]

Part 1 replays, in one process, everything a worker record goes through: the
``@timed`` call, the drain into the outbox, packing, pickling and unpickling (what
the DataLoader's queue does to a batch), then, on the receiving side, unpacking
and ingesting into the rings. The main-process record goes through the call and a
drain. Both are per record over a bare call, best of 5 rounds, in the same run.

Part 2 runs a real DataLoader (2 fork workers) whose ``__getitem__`` makes 200
records per item, with and without ``perfkit.torch.instrument``: the difference
per batch is what handing the records over costs end to end: the two loaders take
turns, one epoch each, and the medians are compared. Part 3 does the same for
torchdata.nodes pipelines (a ParallelMapper with 2 process workers, then 2 thread
workers), when torchdata is installed.
"""

from __future__ import annotations

import argparse
import pickle
import statistics
import sys
import time
from collections.abc import Iterable
from time import perf_counter_ns

import torch
from torch.utils.data import DataLoader, Dataset

import perfkit
import perfkit.torch


def noop() -> None:
    pass


def per_record_ns(n: int) -> tuple[float, float, float, float]:
    bare_fn = noop
    main_reg = perfkit.Registry(capacity=10_000)
    main_fn = perfkit.timed("r", registry=main_reg)(noop)
    worker_reg = perfkit.Registry(capacity=10_000)
    worker_reg.forward(max_records=n + 1)
    worker_fn = perfkit.timed("r", registry=worker_reg)(noop)
    receiver = perfkit.Registry(capacity=10_000)
    best = [float("inf")] * 4
    for _ in range(5):
        t0 = perf_counter_ns()
        for _ in range(n):
            bare_fn()
        bare = (perf_counter_ns() - t0) / n
        t0 = perf_counter_ns()
        for _ in range(n):
            main_fn()
        main_reg.drain()
        main = (perf_counter_ns() - t0) / n - bare
        t0 = perf_counter_ns()
        for _ in range(n):
            worker_fn()
        wire = pickle.dumps(worker_reg.take_records())
        worker_side = (perf_counter_ns() - t0) / n - bare
        t0 = perf_counter_ns()
        receiver.receive(pickle.loads(wire))
        receiver.drain()
        main_side = (perf_counter_ns() - t0) / n
        best = [
            min(a, b)
            for a, b in zip(best, (main, worker_side, main_side, worker_side + main_side), strict=True)
        ]
    return best[0], best[1], best[2], best[3]


class Items(Dataset[torch.Tensor]):
    def __len__(self) -> int:
        return 256

    def __getitem__(self, i: int) -> torch.Tensor:
        for _ in range(200):
            with perfkit.section("work"):
                pass
        return torch.zeros(8)


def loader_pair() -> tuple[Iterable[object], Iterable[object]]:
    """Two DataLoaders (2 fork workers, kept between epochs): as they are, and instrumented."""

    def make() -> DataLoader[torch.Tensor]:
        return DataLoader(
            Items(), batch_size=8, num_workers=2, multiprocessing_context="fork", persistent_workers=True
        )

    return make(), perfkit.torch.instrument(make(), "bench")


def epochs_s(plain: Iterable[object], shipped: Iterable[object], rounds: int) -> tuple[float, float]:
    """Median epoch time of each loader over interleaved rounds, after one warm-up epoch each."""
    times: tuple[list[float], list[float]] = ([], [])
    for loader in (plain, shipped):
        for _ in loader:  # start the workers
            pass
    for _ in range(rounds):
        for loader, out in zip((plain, shipped), times, strict=True):
            t0 = time.perf_counter()
            for _ in loader:
                pass
            out.append(time.perf_counter() - t0)
    return statistics.median(times[0]), statistics.median(times[1])


def work(i: int) -> torch.Tensor:
    """A torchdata map function making 200 records per item, as ``Items.__getitem__`` does."""
    for _ in range(200):
        with perfkit.section("work"):
            pass
    return torch.zeros(8)


def nodes_pair(method: str) -> tuple[Iterable[object], Iterable[object]]:
    """Two torchdata.nodes pipelines (a ParallelMapper, 2 workers): as they are, and instrumented."""
    from torchdata.nodes import Batcher, IterableWrapper, Loader, ParallelMapper

    def make() -> Loader[object]:
        mapper = ParallelMapper(
            IterableWrapper(range(256)), work, num_workers=2, method=method, multiprocessing_context="fork"
        )  # type: ignore[arg-type]
        return Loader(Batcher(mapper, batch_size=8))

    return make(), perfkit.torch.instrument(make(), "bench")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=7, help="interleaved epochs of each loader")
    args = parser.parse_args(argv)
    main_ns, worker_ns, receive_ns, total_ns = per_record_ns(args.records)
    rows = [
        ("made in the main process (call + drain)", main_ns),
        ("made in a worker, worker side (call, outbox, pack, pickle)", worker_ns),
        ("made in a worker, main side (unpickle, unpack, ingest)", receive_ns),
        ("made in a worker, both sides", total_ns),
    ]
    print("per record, ns over a bare call (best of 5 rounds)")
    for label, ns in rows:
        print(f"  {label:<60}{ns:8.0f}  ({ns / main_ns:.2f}x the main-process record)")
    plain, shipped = epochs_s(*loader_pair(), args.rounds)
    batches, records = 256 // 8, 256 * 200
    extra = shipped - plain
    print(
        f"\nmedian epoch of {args.rounds} interleaved rounds\n"
        f"DataLoader, 2 fork workers, {records:,} records per epoch in {batches} batches: "
        f"{plain * 1e3:.1f} ms without handing records over, {shipped * 1e3:.1f} ms with "
        f"({extra / batches * 1e3:+.2f} ms per batch, {extra / records * 1e9:+.0f} ns per record)"
    )
    try:
        import torchdata.nodes  # noqa: F401
    except ImportError:
        print("\ntorchdata is not installed: no torchdata.nodes rows")
        return 0
    for method in ("process", "thread"):
        plain, shipped = epochs_s(*nodes_pair(method), args.rounds)
        extra = shipped - plain
        print(
            f"torchdata.nodes ParallelMapper, 2 {method} workers, {records:,} records per epoch: "
            f"{plain * 1e3:.1f} ms without, {shipped * 1e3:.1f} ms with "
            f"({extra / records * 1e9:+.0f} ns per record)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
