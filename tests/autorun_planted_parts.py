"""A plain training script with planted step parts, for ``perfkit run`` (no perfkit code in it).

``python autorun_planted_parts.py PART=SECONDS ...``: two epochs of a tiny model over a
DataLoader, each planted ``PART`` taking ``SECONDS`` more each step: ``optimizer`` (an optimizer
whose step sleeps, ``tests.planted_parts.SlowSGD``), ``backward`` (a custom autograd Function whose
backward sleeps, ``SlowBackward``), ``forward`` (a sleep in the forward pass). The loop is written
the way most scripts write it: ``zero_grad`` first, then the forward pass and the loss, the
backward pass and the optimizer step.

The script keeps its own clock (``time.perf_counter``, in ``tests.planted_parts.TRUTH``) and
prints one JSON line per epoch: ``wall``, from ``iter()`` on the loader to the end of its last
step (the wait that ends the loop is no step's); ``body``, the loop bodies; and the seconds of each
part it timed around exactly what perfkit should call that part (``optimizer`` is the
optimizer's own step, timed inside ``SlowSGD``). Those are the truth a test holds perfkit's
account against.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

import torch
from torch.utils.data import DataLoader, TensorDataset

from tests.planted_parts import TRUTH, SlowBackward, SlowSGD, sleep


def epoch(
    loader: DataLoader[Any], model: torch.nn.Module, opt: SlowSGD, plant: dict[str, float]
) -> dict[str, float]:
    TRUTH.reset()
    t0 = end = time.perf_counter()
    for (x,) in loader:
        body = time.perf_counter()
        with TRUTH.part("zero_grad"):
            opt.zero_grad()
        with TRUTH.part("forward"):
            y = SlowBackward.apply(model(x), plant.get("backward", 0.0))
            sleep(plant.get("forward", 0.0))
            loss = y.pow(2).mean()
        with TRUTH.part("backward"):
            loss.backward()
        opt.step()
        end = time.perf_counter()
        TRUTH.seconds["body"] += end - body
    return {"wall": end - t0, **TRUTH.seconds}


def main(plant: dict[str, float]) -> None:
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = torch.nn.Sequential(torch.nn.Linear(32, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
    opt = SlowSGD(model.parameters(), lr=0.01, step_s=plant.get("optimizer", 0.0))
    loader = DataLoader(TensorDataset(torch.randn(96, 32)), batch_size=4)
    model.train()
    for _ in range(2):
        print(json.dumps(epoch(loader, model, opt, plant)), flush=True)


if __name__ == "__main__":  # run as a script only: pytest imports this file for its doctests
    main({part: float(s) for part, s in (arg.split("=") for arg in sys.argv[1:])})
