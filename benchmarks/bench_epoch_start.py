"""An epoch's start with 2 DataLoader workers: ``iter()`` plus the first batch, with and without
``perfkit.window``, and where the time goes.

    python benchmarks/bench_epoch_start.py [--runs 3] [--epochs 18]

A plain script (a small MLP, a shuffled training loader and a validation loader, 2 workers each,
not persistent) runs ``--epochs`` epochs in a fresh process per run, the modes interleaved:
``none`` (perfkit not even imported), ``window`` (each stage epoch in ``perfkit.window``, batches
through ``w.iterate``), and ``window+`` (also ``perfkit.torch.instrument`` on both loaders, a
``ResourceSampler`` and a run directory). Per stage epoch, on the script's own clock: the time
from the epoch's start (before the window is entered) to its first batch; inside it, what the
DataLoader itself took (its ``__iter__``, which forks the workers, and its first ``__next__``,
spied on the class) and what is left, perfkit's own work in the main thread; and, in each worker,
the time from its fork to its first ``__getitem__`` (its set-up: perfkit's fork hooks and, with
``instrument``, its ``worker_init_fn``). Medians over every epoch but each run's first.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

MODES = ("none", "window", "instrument", "sampler", "window+")


def child(mode: str, epochs: int, out: Path) -> None:
    import torch
    import torch.utils.data.dataloader as dl
    from torch.utils.data import DataLoader, Dataset

    spans: dict[str, float] = {}
    forked = [0.0]
    os.register_at_fork(after_in_child=lambda: forked.__setitem__(0, time.perf_counter()))

    class Rows(Dataset[tuple[torch.Tensor, torch.Tensor]]):
        def __init__(self) -> None:
            self.x, self.y, self.first = torch.randn(1024, 64), torch.randn(1024, 1), True

        def __len__(self) -> int:
            return 1024

        def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
            if self.first:  # in a worker: its set-up, from its fork
                self.first = False
                with open(out.with_suffix(".workers"), "a") as fh:
                    fh.write(f"{(time.perf_counter() - forked[0]) * 1e3}\n")
            return self.x[i], self.y[i]

    iter_of = DataLoader.__iter__
    next_of = dl._BaseDataLoaderIter.__next__

    def timed_iter(self: Any) -> Any:
        t0 = time.perf_counter()
        it = iter_of(self)
        spans["iter"] = time.perf_counter() - t0
        return it

    def timed_next(self: Any) -> Any:
        t0 = time.perf_counter()
        item = next_of(self)
        spans.setdefault("next", time.perf_counter() - t0)
        return item

    DataLoader.__iter__ = timed_iter  # type: ignore[method-assign]
    dl._BaseDataLoaderIter.__next__ = timed_next  # type: ignore[method-assign]
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loaders: dict[str, Any] = {
        "train": DataLoader(Rows(), batch_size=32, num_workers=2, shuffle=True),
        "val": DataLoader(Rows(), batch_size=64, num_workers=2),
    }
    run = None
    if mode != "none":
        import perfkit
        import perfkit.torch
        from perfkit.run import RunWriter

        if mode in ("instrument", "window+"):
            loaders = {k: perfkit.torch.instrument(v, k) for k, v in loaders.items()}
        if mode in ("sampler", "window+"):
            perfkit.ResourceSampler().start()
        if mode == "window+":
            run = RunWriter(out.with_suffix(".run"))
    rows: dict[str, list[tuple[float, float]]] = {"train": [], "val": []}

    def stage_epoch(stage: str, batches: Any, t0: float) -> None:
        first = True
        for x, y in batches:
            if first:
                total = time.perf_counter() - t0
                rows[stage].append((total, total - spans["iter"] - spans["next"]))
                first = False
            if stage == "train":
                opt.zero_grad()
                torch.nn.functional.mse_loss(model(x), y).backward()
                opt.step()
            else:
                with torch.no_grad():
                    model(x)

    for epoch in range(epochs):
        for stage, loader in loaders.items():
            spans.clear()
            t0 = time.perf_counter()
            if mode == "none":
                stage_epoch(stage, loader, t0)
            else:
                with perfkit.window(stage, epoch=epoch, run=run, console=False) as w:
                    stage_epoch(stage, w.iterate(loader), t0)
    out.write_text(json.dumps({k: v[1:] for k, v in rows.items()}))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--epochs", type=int, default=18)
    parser.add_argument("--modes", default=",".join(MODES), help=f"of {', '.join(MODES)}")
    parser.add_argument("--child", choices=MODES)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.epochs, args.out)
        return
    got: dict[tuple[str, str], list[tuple[float, float]]] = {}
    workers: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.runs):
            for mode in args.modes.split(","):
                out = Path(tmp) / f"{mode}{r}.json"
                command = [sys.executable, __file__, "--child", mode, "--epochs", str(args.epochs)]
                subprocess.run([*command, "--out", str(out)], check=True)
                for stage, rows in json.loads(out.read_text()).items():
                    got.setdefault((mode, stage), []).extend(map(tuple, rows))
                lines = out.with_suffix(".workers").read_text().split()
                workers.setdefault(mode, []).extend(float(x) for x in lines)
    print(f"{args.runs} runs x {args.epochs} epochs per mode, interleaved; medians in ms")
    head = ("mode", "stage", "iter()+first batch", "perfkit, main thread", "worker set-up")
    print(" ".join(h.rjust(w) for h, w in zip(head, (8, 6, 19, 21, 14), strict=True)))
    for (mode, stage), rows in got.items():
        total = statistics.median(r[0] for r in rows) * 1e3
        own = statistics.median(r[1] for r in rows) * 1e3
        setup = statistics.median(workers[mode])
        print(f"{mode:>8} {stage:>6} {total:>19.1f} {own:>21.2f} {setup:>14.1f}")


if __name__ == "__main__":
    main()
