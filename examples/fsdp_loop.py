"""perfkit around an FSDP2 loop (``fully_shard`` per layer): each rank's step split into its compute and
its waits in the all-gathers and reduce-scatters, per step part, merged over the ranks.

    torchrun --nproc_per_node 2 examples/fsdp_loop.py runs/fsdp                      # CPU, gloo
    torchrun --nproc_per_node 4 examples/fsdp_loop.py runs/fsdp --slow-rank 1         # a slow forward
    perfkit run -- torchrun --nproc_per_node 2 examples/fsdp_loop.py runs/x --plain  # no perfkit in it
    perfkit summary runs/fsdp

Rank 0 prints, per epoch, the exposed communication (``perfkit.stages.communication``: its share,
where, in which collective, the bytes per step) and where in the step the slowest rank is slow
(``perfkit.stages.straggler_parts``). ``--plain`` is the same loop with no perfkit call, for
``perfkit run`` (which records rank 0 alone). Recipe and figures: docs/distributed.md.
"""

from __future__ import annotations

import argparse
import contextlib
import time
from typing import Any

import torch
import torch.distributed as dist
from torch.distributed.fsdp import fully_shard
from torch.utils.data import DataLoader, TensorDataset

import perfkit
import perfkit.torch
from perfkit.run import RunWriter
from perfkit.stages import communication, straggler_parts


class Layer(torch.nn.Module):
    def __init__(self, width: int, slow_s: float) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(width, width)
        self.slow_s = slow_s

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.slow_s:
            time.sleep(self.slow_s)  # a rank whose forward is slower (a slower device, a busy host)
        out: torch.Tensor = torch.relu(self.linear(x))
        return out


def report(window: Any) -> str:
    c = communication(window)
    if c is None:
        return f"epoch {window.epoch}: no collective timed"
    where = ", ".join(f"{k} {v / c.wall_s:.0%}" for k, v in c.by_part.items())
    which = ", ".join(
        f"{k} {v / c.wall_s:.0%} ({c.bytes_per_step.get(k, 0) / 1e6:.1f} MB/step)"
        for k, v in c.by_collective.items()
    )
    line = f"epoch {window.epoch}: communication {c.share:.0%} of the epoch ({where}; {which})"
    slow = straggler_parts(window)
    if slow is not None:
        excess = slow.excess_s[slow.part] / slow.steps * 1e3
        line += f"; rank {slow.rank} computes {excess:.1f} ms/step more in {slow.part}"
    return line


def main() -> None:
    args = argparse.ArgumentParser()
    args.add_argument("out")
    args.add_argument("--plain", action="store_true", help="no perfkit in the loop (for perfkit run)")
    args.add_argument("--slow-rank", type=int, default=-1)
    args.add_argument("--width", type=int, default=512)
    args.add_argument("--batch", type=int, default=64)
    args.add_argument("--epochs", type=int, default=3)
    opts = args.parse_args()
    dist.init_process_group("gloo")  # on GPUs: "nccl", and each rank's model on its device
    rank = dist.get_rank()
    torch.manual_seed(0)
    slow = 0.03 if rank == opts.slow_rank else 0.0
    model = torch.nn.Sequential(*[Layer(opts.width, slow if i == 0 else 0.0) for i in range(4)])
    for layer in model:
        fully_shard(layer)  # each layer's parameters all-gathered in its forward and backward
    fully_shard(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    data = TensorDataset(torch.randn(8 * opts.batch, opts.width))
    loader = DataLoader(data, batch_size=opts.batch)
    run = RunWriter(opts.out) if rank == 0 and not opts.plain else None
    for epoch in range(opts.epochs):
        window = (
            contextlib.nullcontext(None)
            if opts.plain
            else perfkit.window("train", epoch=epoch, run=run, gather=perfkit.torch.gather_ranks)
        )
        with window as w:
            for (x,) in loader if w is None else w.iterate(loader):
                loss = model(x).square().mean()
                loss.backward()
                opt.step()
                opt.zero_grad()
        if w is not None and rank == 0 and w.window is not None:
            print(report(w.window), flush=True)
    if run is not None:
        run.finish(perfkit.snapshot())
    dist.barrier()  # the ranks end together, and the group is ended before the interpreter's exit
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
