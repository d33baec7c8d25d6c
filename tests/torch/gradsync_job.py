"""One rank of a plain DDP loop over gloo whose rank 3 computes slowly.

    python gradsync_job.py RANK WORLD PORT OUT

Rank 3's forward sleeps ``PLANTED_S`` more per step, so the other ranks wait for it in the
gradient all-reduce and every rank's step is as long. Each rank first checks that the timed
hook's all-reduce gives DDP's own result (the same model trained a few steps with and without
it: parameters equal bit for bit), then runs ``EPOCHS`` windows merged over the ranks, with
``perfkit.torch.time_gradient_sync`` on its model. Each rank prints one JSON line: what its own
clock (``time.perf_counter``) saw around each step, each forward and each backward, and how long
each backward was held past its last gradient (stamped by a hook on the first layer's parameters,
whose gradients autograd computes last): the rank's wait for the others, by its own clock.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset

import perfkit
import perfkit.torch
from perfkit.run import RunWriter

PLANTED_S = 0.04
SLOW_RANK = 3
EPOCHS = 2
BUCKET_MB = 0.004  # a few buckets, so a step's wait spans several all-reduces


class Net(torch.nn.Module):
    def __init__(self, slow_s: float) -> None:
        super().__init__()
        self.layers = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 2))
        self.slow_s = slow_s

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.slow_s:
            time.sleep(self.slow_s)
        out: torch.Tensor = self.layers(x)
        return out


def model(slow_s: float) -> DDP:
    torch.manual_seed(0)
    return DDP(Net(slow_s), bucket_cap_mb=BUCKET_MB)


def batches(rank: int) -> DataLoader[Any]:
    g = torch.Generator().manual_seed(rank)
    data = TensorDataset(torch.randn(192, 32, generator=g), torch.randint(0, 2, (192,), generator=g))
    return DataLoader(data, batch_size=16)


def same_as_ddp(rank: int) -> bool:
    """A few steps with and without the timed hook, from the same seed: equal parameters."""
    trained = []
    for timed in (False, True):
        m = model(0.0)
        if timed:
            perfkit.torch.time_gradient_sync(m, registry=perfkit.Registry())
        opt = torch.optim.SGD(m.parameters(), lr=0.1)
        for i, (x, y) in enumerate(batches(rank)):
            if i == 4:
                break
            torch.nn.functional.cross_entropy(m(x), y).backward()
            opt.step()
            opt.zero_grad()
        trained.append([p.detach().clone() for p in m.parameters()])
    return all(torch.equal(a, b) for a, b in zip(*trained, strict=True))


def main() -> None:  # run as a script only: pytest imports this file for its doctests
    rank, world, port, out = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), Path(sys.argv[4])
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    same = same_as_ddp(rank)
    m = model(PLANTED_S if rank == SLOW_RANK else 0.0)
    perfkit.torch.time_gradient_sync(m)
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    last_grad = [0.0]
    for p in m.module.layers[0].parameters():
        p.register_hook(lambda g: last_grad.__setitem__(0, max(last_grad[0], time.perf_counter())))
    run = RunWriter(out) if rank == 0 else None
    # the fixed-size merge (as above 8 ranks): each rank's sync wait reaches rank 0 in its row
    ranks = perfkit.torch.TorchRanks(exact_max=1)
    clocks = []
    for epoch in range(EPOCHS):
        own: dict[str, list[float]] = {"step": [], "forward": [], "backward": [], "held": []}
        with perfkit.window("train", epoch=epoch, run=run, gather=ranks) as w:
            for x, y in w.iterate(batches(rank)):
                t0 = time.perf_counter()
                loss = torch.nn.functional.cross_entropy(m(x), y)
                t1 = last_grad[0] = time.perf_counter()
                loss.backward()
                t2 = time.perf_counter()
                opt.step()
                opt.zero_grad()
                t3 = time.perf_counter()
                own["forward"].append(t1 - t0)
                own["backward"].append(t2 - t1)
                own["held"].append(t2 - last_grad[0])
                own["step"].append(t3 - t0)
        clocks.append(own)
    if run is not None:
        run.finish(perfkit.snapshot())
    print(json.dumps({"rank": rank, "same_as_ddp": same, "epochs": clocks}), flush=True)
    dist.barrier()
    # a process group left to the interpreter's exit can abort there: end it as a script should
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
