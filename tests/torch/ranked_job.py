"""A tiny model's loop on CPU under accelerate or Lightning Fabric, two processes, each with its own clock.

    accelerate launch --multi_gpu --num_processes 2 --num_machines 1 --mixed_precision no \
        --dynamo_backend no ranked_job.py accelerate OUT
    python ranked_job.py fabric OUT                      # Fabric starts the second process itself

The loop is the recipe of docs/accelerate-fabric.md. Rank r's collate sleeps ``SLEEP_S[r]`` per
batch, so the ranks' data-wait shares differ. Each rank prints one JSON line: its rank and, per
epoch, the wall time of the loop and the time it waited for batches, by its own clock
(``time.perf_counter`` around each ``next``).
"""

from __future__ import annotations

import faulthandler
import gc
import json
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import torch
from torch.utils.data import DataLoader, TensorDataset, default_collate

import perfkit
import perfkit.torch
from perfkit.run import RunWriter

SLEEP_S = (0.004, 0.016)
EPOCHS = 2


def loader(rank: int) -> DataLoader[Any]:
    def collate(items: list[Any]) -> Any:
        time.sleep(SLEEP_S[rank])
        return default_collate(items)

    g = torch.Generator().manual_seed(0)
    data = TensorDataset(torch.randn(256, 32, generator=g), torch.randint(0, 2, (256,), generator=g))
    return DataLoader(data, batch_size=16, collate_fn=collate)


def clocked(batches: Iterable[Any], step: Callable[[Any], None], waited: list[float]) -> None:
    """The loop, with the test's own clock of the time each ``next`` waits."""
    it = iter(batches)
    while True:
        t0 = time.perf_counter()
        try:
            batch = next(it)
        except StopIteration:
            waited.append(time.perf_counter() - t0)
            return
        waited.append(time.perf_counter() - t0)
        step(batch)


def train(
    out: Path, rank: int, batches: Any, step: Callable[[Any], None], main: bool
) -> list[tuple[float, float]]:
    run = RunWriter(out) if main else None  # rank 0 writes the run
    epochs = []
    for epoch in range(EPOCHS):
        waited: list[float] = []
        with perfkit.window("train", epoch=epoch, run=run, gather=perfkit.torch.gather_ranks) as w:
            t0 = time.perf_counter()
            clocked(w.iterate(batches), step, waited)
            epochs.append((time.perf_counter() - t0, sum(waited)))
    if run is not None:
        run.finish(perfkit.snapshot())
    return epochs


def with_accelerate(out: Path) -> tuple[int, list[tuple[float, float]]]:
    from accelerate import Accelerator

    accelerator = Accelerator(cpu=True)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    rank = accelerator.process_index
    model, opt, batches = accelerator.prepare(model, opt, loader(rank))
    batches = perfkit.torch.instrument(batches, "train")

    def step(batch: Any) -> None:
        x, y = batch
        accelerator.backward(torch.nn.functional.cross_entropy(model(x), y))
        opt.step()
        opt.zero_grad()

    epochs = train(out, rank, batches, step, accelerator.is_main_process)
    accelerator.free_memory()  # its prepared DDP model holds the group: gone before the teardown
    return rank, epochs


def with_fabric(out: Path) -> tuple[int, list[tuple[float, float]]]:
    from lightning.fabric import Fabric

    fabric = Fabric(accelerator="cpu", devices=2, strategy="ddp")
    fabric.launch()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 2))
    model, opt = fabric.setup(model, torch.optim.SGD(model.parameters(), lr=0.01))
    rank = fabric.global_rank
    batches = perfkit.torch.instrument(fabric.setup_dataloaders(loader(rank)), "train")

    def step(batch: Any) -> None:
        x, y = batch
        fabric.backward(torch.nn.functional.cross_entropy(model(x), y))
        opt.step()
        opt.zero_grad()

    return rank, train(out, rank, batches, step, fabric.is_global_zero)


if __name__ == "__main__":
    faulthandler.enable()  # names the thread if the exit below aborts again
    framework, out = sys.argv[1], Path(sys.argv[2])
    rank, epochs = (with_accelerate if framework == "accelerate" else with_fabric)(out)
    print(json.dumps({"rank": rank, "epochs": epochs}), flush=True)
    # A process group left to the interpreter's exit can abort there ("terminate called without an
    # active exception", exit -6: once in 10 runs, and in CI): the ranks end together, the group
    # is destroyed, and what still holds it is collected while the interpreter is whole.
    torch.distributed.barrier()
    torch.distributed.destroy_process_group()
    gc.collect()
