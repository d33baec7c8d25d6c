"""What timing a step's parts and a wait's parts costs, measured directly.

    python benchmarks/bench_step_parts.py [--steps 2000] [--repeats 7]

1. The step's parts (``perfkit.torch.time_step_parts``): the same tiny training step (a 16x16
   linear layer: forward, ``zero_grad``, ``backward``, ``optimizer.step``) inside an open stage
   step, with the parts timed and without, alternated ``--repeats`` times; the difference of the
   fastest of each is the cost per step (three wrapped torch calls, the recorder's part
   bookkeeping, and the parts' records at the step's end).
2. The wait's parts (``perfkit.torch``'s ``hook_wait_parts``): one call of a wrapped torch
   function inside an open wait, against the same call unwrapped; a batch makes two such calls
   (the sampler, and making the batch or rebuilding a worker's).

Each figure is the minimum over repeats: the cost on a quiet core; a busy machine adds noise,
never the cost.
"""

from __future__ import annotations

import argparse
import time

import torch

import perfkit
import perfkit.torch
from perfkit.stages import StageRecorder


def steps_per_s(steps: int, parts: bool) -> float:
    """Seconds per training step inside an open stage step, with or without the parts timed."""
    torch.manual_seed(0)
    model = torch.nn.Linear(16, 16)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(4, 16)
    rec = StageRecorder(perfkit.Registry(), top_k_slowest=0)
    stop = perfkit.torch.time_step_parts(rec) if parts else None
    rec.begin("train", 0)
    t0 = time.perf_counter()
    for _ in range(steps):
        rec.step_begin("train")
        loss = model(x).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
        rec.step_end("train")
    elapsed = (time.perf_counter() - t0) / steps
    rec.end("train")
    if stop is not None:
        stop()
    return elapsed


def wrapped_call(n: int) -> tuple[float, float]:
    """Seconds per call of a list sampler's ``_next_index`` inside an open wait: wrapped (timed and
    recorded), and the sampler's own ``next`` (what the wrapper wraps)."""
    from torch.utils.data import DataLoader

    items = list(range(2 * n + 10))
    loader = perfkit.torch.instrument(DataLoader(items, batch_size=None), "bench", time_wait=True)
    it = iter(loader)
    reg = perfkit.get_registry()
    t0 = time.perf_counter()
    for _ in range(n):
        with perfkit.section("bench.data.wait", registry=reg):
            it._next_index()  # type: ignore[attr-defined]
    inside = (time.perf_counter() - t0) / n
    t0 = time.perf_counter()
    for _ in range(n):
        with perfkit.section("bench.data.wait", registry=reg):
            it._sampler_iter.__next__()  # type: ignore[attr-defined]
    bare = (time.perf_counter() - t0) / n
    return inside, bare


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    steps_per_s(200, True)  # warm up both
    steps_per_s(200, False)
    without, with_parts = [], []
    for _ in range(args.repeats):
        without.append(steps_per_s(args.steps, False))
        with_parts.append(steps_per_s(args.steps, True))
    base, timed = min(without), min(with_parts)
    print(f"training step without the parts timed: {base * 1e6:.1f} µs")
    print(f"with them: {timed * 1e6:.1f} µs, +{(timed - base) * 1e6:.2f} µs a step ({timed / base:.3f}x)")
    calls = [wrapped_call(20_000) for _ in range(args.repeats)]
    inside = min(c[0] for c in calls)
    bare = min(c[1] for c in calls)
    print(
        f"a wait part's wrapper: +{(inside - bare) * 1e9:.0f} ns a call inside a wait "
        f"(two a batch: +{2 * (inside - bare) * 1e6:.2f} µs a batch)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
