"""What timing a collective's wait costs (``perfkit.torch.time_collectives``), measured directly.

    python benchmarks/bench_collectives.py [--calls 20000] [--repeats 9]

Inside an open stage step of a ``StageRecorder`` (the consumer a session gives it), each call with
the wrappers in and without, alternated ``--repeats`` times:

1. perfkit's own cost, on stand-in collectives that do nothing (gloo's thread hand-off, tens of
   microseconds of jitter even in a group of one, would drown it): a synchronous call (the call
   timed, one record, one bytes sample, the step part looked up); an asynchronous call and its
   ``Work.wait()`` (a real, finished gloo work: tagged at the launch, its wait timed); an asynchronous
   call never waited for (the tag alone, and its release when the work goes);
2. for scale, the same with gloo's real ``all_reduce`` of 1,024 floats in a group of one.

The difference of the fastest of each is the cost per call. Each figure is the minimum over
repeats: the cost on a quiet core; a busy machine adds noise, never the cost. On CUDA two events
per wait are recorded on the waiting stream (and nothing synchronizes); this CPU benchmark does not
measure them.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch
import torch.distributed as dist

import perfkit
import perfkit.torch
from perfkit.stages import StageRecorder


def per_call(calls: int, timed: bool, call: Callable[[], object]) -> float:
    """Seconds per ``call()`` inside an open stage step, with the collectives timed or not."""
    rec = StageRecorder(perfkit.Registry(), top_k_slowest=0)
    stop = perfkit.torch.time_collectives(rec) if timed else None
    rec.begin("train", 0)
    rec.step_begin("train")
    t0 = time.perf_counter()
    for _ in range(calls):
        call()
    elapsed = (time.perf_counter() - t0) / calls
    rec.step_end("train")
    rec.end("train")
    if stop is not None:
        stop()
    return elapsed


def launch(out: torch.Tensor, tensor: torch.Tensor) -> dist.Work:
    """An asynchronous all-gather, looked up at the call (perfkit's wrapper, where it is in)."""
    work: dist.Work = dist.all_gather_single(out, tensor, async_op=True)
    return work


def compare(name: str, call: Callable[[], object], calls: int, repeats: int) -> None:
    bare, timed = [], []
    for _ in range(repeats):
        bare.append(per_call(calls, False, call))
        timed.append(per_call(calls, True, call))
    b, t = min(bare) * 1e6, min(timed) * 1e6
    print(f"{name:32} {b:9.2f} {t:9.2f} {t - b:8.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--repeats", type=int, default=9)
    args = parser.parse_args()
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        dist.init_process_group("gloo", init_method=f"file://{Path(tmp) / 'store'}", rank=0, world_size=1)
        tensor, out = torch.ones(1024), torch.empty(1024)
        done = dist.all_reduce(tensor, async_op=True)
        done.wait()  # a finished work: its wait() returns at once, every time
        print(f"{'call':32} {'bare µs':>9} {'timed µs':>9} {'cost µs':>8}")
        real = (dist.all_reduce, dist.all_gather_single)
        try:  # the stand-ins beneath perfkit's wrappers, where a backend's calls would be
            dist.all_reduce = lambda *a, **k: None
            dist.all_gather_single = lambda *a, **k: done
            compare("synchronous call", lambda: dist.all_reduce(tensor), args.calls, args.repeats)
            compare("async call + wait()", lambda: launch(out, tensor).wait(), args.calls, args.repeats)
            compare("async call, never waited", lambda: launch(out, tensor), args.calls, args.repeats)
        finally:
            dist.all_reduce, dist.all_gather_single = real
        try:
            compare(
                "gloo all_reduce, 1,024 floats", lambda: dist.all_reduce(tensor), args.calls, args.repeats
            )
        finally:
            dist.destroy_process_group()


if __name__ == "__main__":
    main()
