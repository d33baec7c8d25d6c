"""perfkit in a loop around accelerate's ``prepare``: each epoch's account, merged over the processes.

    python examples/accelerate_loop.py runs/accelerate                     # one process
    accelerate launch --multi_gpu --num_processes 2 --num_machines 1 --mixed_precision no \\
        --dynamo_backend no examples/accelerate_loop.py runs/accelerate    # two, on CPU (gloo)
    perfkit summary runs/accelerate

A tiny model on synthetic data whose collate function is slower than the model: the data wait
shows. Recipe and rules: docs/accelerate-fabric.md.
"""

import sys
import time

import torch
from accelerate import Accelerator
from torch.utils.data import DataLoader, TensorDataset, default_collate

import perfkit
import perfkit.torch
from perfkit.run import RunWriter


def slow_collate(items):
    time.sleep(0.005)  # a data pipeline slower than the model
    return default_collate(items)


def main(out: str) -> None:
    accelerator = Accelerator(cpu=True)  # cpu=True: runs anywhere; drop it on GPUs
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    data = TensorDataset(torch.randn(512, 32), torch.randint(0, 2, (512,)))
    loader = DataLoader(data, batch_size=16, collate_fn=slow_collate)
    model, opt, loader = accelerator.prepare(model, opt, loader)

    loader = perfkit.torch.instrument(loader, "train")  # optional: its workers' own records
    run = RunWriter(out) if accelerator.is_main_process else None  # rank 0 writes the run
    for epoch in range(2):
        with perfkit.window("train", epoch=epoch, run=run, gather=perfkit.torch.gather_ranks) as w:
            for x, y in w.iterate(loader):
                loss = torch.nn.functional.cross_entropy(model(x), y)
                accelerator.backward(loss)
                opt.step()
                opt.zero_grad()
    if run is not None:
        run.finish(perfkit.snapshot())
    accelerator.end_training()  # ends the process group: left to the exit, gloo can abort there


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "runs/accelerate")
