"""What a loader trial costs on the OCR demo's loaders, and what it picks (not a test).

    python benchmarks/bench_trial.py [--budget-s 30] [--need 10]

The demo's train and val DataLoaders (``examples.ocr_dbnet.module.make_loaders`` at the sizes of
``configs/demo.yaml``: receipts rendered and augmented per item, DBNet targets made in the
collate) are each timed by ``perfkit.trial``, the whole trial measured by this script's own
clock: the goal is the picked setting within the budget (30 s by default).
"""

from __future__ import annotations

import argparse
import time

import torch

import perfkit
from examples.ocr_dbnet.module import make_loaders
from perfkit.reports import trial_text


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--budget-s", type=float, default=30.0)
    parser.add_argument("--need", type=float, default=None, help="batches/s the loop consumed")
    args = parser.parse_args()
    torch.set_num_threads(1)  # as the demo runs (configs/demo.yaml: torch_threads)
    train, val = make_loaders(
        train_size=32, val_size=16, image_size=256, lines=(10, 16), batch_size=4,
        val_image_size=384, val_lines=(18, 26), multiprocessing_context="fork",
    )  # fmt: skip
    for name, loader in (("train", train), ("val", val)):
        t0 = time.perf_counter()
        result = perfkit.trial(loader, name=name, budget_s=args.budget_s, need_batches_per_s=args.need)
        took = time.perf_counter() - t0
        print(trial_text(result))
        best = result.best.label if result.best is not None else "none"
        print(f"-> {name}: picked {best} in {took:.1f} s (own clock; budget {args.budget_s:g} s)\n")


if __name__ == "__main__":
    main()
