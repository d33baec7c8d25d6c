"""perfkit in a Lightning Fabric loop: each epoch's account, merged over the processes.

    python examples/fabric_loop.py runs/fabric            # two processes on CPU (DDP over gloo)
    python examples/fabric_loop.py runs/fabric 1          # one
    perfkit summary runs/fabric

A tiny model on synthetic data whose collate function is slower than the model: the data wait
shows. Recipe and rules: docs/accelerate-fabric.md.
"""

import sys
import time

import torch
from lightning.fabric import Fabric
from torch.utils.data import DataLoader, TensorDataset, default_collate

import perfkit
import perfkit.torch
from perfkit.run import RunWriter


def slow_collate(items):
    time.sleep(0.005)  # a data pipeline slower than the model
    return default_collate(items)


def main(out: str, devices: int) -> None:
    fabric = Fabric(accelerator="cpu", devices=devices, strategy="ddp" if devices > 1 else "auto")
    fabric.launch()  # starts the other processes
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 2))
    model, opt = fabric.setup(model, torch.optim.SGD(model.parameters(), lr=0.01))
    data = TensorDataset(torch.randn(512, 32), torch.randint(0, 2, (512,)))
    loader = fabric.setup_dataloaders(DataLoader(data, batch_size=16, collate_fn=slow_collate))

    run = RunWriter(out) if fabric.is_global_zero else None  # rank 0 writes the run
    for epoch in range(2):
        with perfkit.window("train", epoch=epoch, run=run, gather=perfkit.torch.gather_ranks) as w:
            for x, y in w.iterate(loader):
                loss = torch.nn.functional.cross_entropy(model(x), y)
                fabric.backward(loss)
                opt.step()
                opt.zero_grad()
    if run is not None:
        run.finish(perfkit.snapshot())
    if torch.distributed.is_initialized():  # left to the interpreter's exit, gloo can abort there
        torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "runs/fabric", int(sys.argv[2]) if len(sys.argv) > 2 else 2)
