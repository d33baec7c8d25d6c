"""What perfkit's Hugging Face callback costs per training step, on a tiny CPU model.

    python benchmarks/bench_huggingface.py [--steps 200] [--rounds 5]

Each configuration trains the same tiny linear model for one epoch of ``--steps`` steps with
the Hugging Face Trainer; a timing callback, present in every configuration, reads the clock
at the start and end of the epoch. Configurations (an empty ``TrainerCallback``, and
``PerfkitCallback`` with its run directory, console block and metrics through
``Trainer.log``, the resource sampler off as in the empty case) are interleaved over
``--rounds`` rounds; the median per-step time is reported with its difference from the
empty callback's.
"""

from __future__ import annotations

import argparse
import logging
import statistics
import tempfile
import time
import warnings
from typing import Any

import torch
from perfkit_hf import PerfkitCallback
from transformers import Trainer, TrainerCallback, TrainingArguments


class Linear(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(32, 1)

    def forward(self, x: torch.Tensor, labels: torch.Tensor) -> dict[str, torch.Tensor]:
        return {"loss": torch.nn.functional.mse_loss(self.layer(x), labels)}


class EpochClock(TrainerCallback):  # type: ignore[misc]
    def __init__(self) -> None:
        self.per_step: list[float] = []
        self.t0 = 0.0

    def on_epoch_begin(self, *args: Any, **kwargs: Any) -> None:
        self.t0 = time.perf_counter()

    def on_epoch_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.per_step.append((time.perf_counter() - self.t0) / max(1, state.global_step))


def run(steps: int, extra: TrainerCallback) -> float:
    data = [{"x": torch.randn(32), "labels": torch.randn(1)} for _ in range(steps * 8)]
    clock = EpochClock()
    with tempfile.TemporaryDirectory() as out:
        args = TrainingArguments(
            output_dir=out,
            per_device_train_batch_size=8,
            num_train_epochs=1,
            use_cpu=True,
            report_to=[],
            logging_strategy="no",
            save_strategy="no",
            disable_tqdm=True,
        )
        Trainer(model=Linear(), args=args, train_dataset=data, callbacks=[clock, extra]).train()
    return clock.per_step[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5)
    ns = parser.parse_args()
    warnings.filterwarnings("ignore")
    logging.getLogger("perfkit").setLevel(logging.WARNING)
    configs = {
        "empty TrainerCallback": lambda: TrainerCallback(),
        "PerfkitCallback": lambda: PerfkitCallback(sample_resources=False, console=False),
    }
    times: dict[str, list[float]] = {name: [] for name in configs}
    run(ns.steps, TrainerCallback())  # warm-up: imports, first allocations
    for _ in range(ns.rounds):
        for name, make in configs.items():
            times[name].append(run(ns.steps, make()))
    base = statistics.median(times["empty TrainerCallback"])
    print(f"{'configuration':<24} {'per step':>10} {'vs empty':>10}")
    for name, values in times.items():
        med = statistics.median(values)
        print(f"{name:<24} {med * 1e6:>8.1f} µs {(med - base) * 1e6:>+8.1f} µs")


if __name__ == "__main__":
    main()
