"""A four-process DDP fit over gloo in which rank 2 loads its data 3x slower than the others.

    python ddp_straggler.py OUT_DIR

Each rank writes what its own clocks saw (``truth_rank{R}.json``: the waits for each batch and
the epoch bounds); rank 0 writes the run directory under OUT_DIR.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
import torch.distributed as dist

sys.path.insert(0, str(Path(__file__).resolve().parent))

from perfkit_lightning import PerfMonitor
from planted import TRUTH, Plan, Planted, Rows, fit  # type: ignore[import-not-found]

SLOW, RANKS = 2, 4


class RankRows(Rows):
    """Rows whose loading takes 3x longer on rank 2."""

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        rank = dist.get_rank() if dist.is_initialized() else 0
        self.getitem_s = 0.009 if rank == SLOW else 0.003
        return super().__getitem__(i)


class Uneven(Planted):
    def _loader(self, stage, n, getitem_s):  # type: ignore[no-untyped-def]
        loader = super()._loader(stage, n, getitem_s)
        loader.dataset.__class__ = RankRows  # type: ignore[attr-defined]
        return loader


def main(out: str) -> None:
    monitor = PerfMonitor(sample_resources=False, run_dir=f"{out}/run", top_k_slowest=0)
    fit(
        Plan(train_n=64, train_step_s=0.004),
        out,
        [monitor],
        module=Uneven,
        devices=RANKS,
        strategy="ddp",
        limit_val_batches=0,
    )
    rank = dist.get_rank() if dist.is_initialized() else 0
    stage = "train"
    truth = {
        "wall": [TRUTH.wall(stage, k) for k in range(len(TRUTH.ends[stage]))],
        "wait": [sum(TRUTH.inside(TRUTH.waits[stage], stage, k)) for k in range(len(TRUTH.ends[stage]))],
    }
    Path(out, f"truth_rank{rank}.json").write_text(json.dumps(truth))


if __name__ == "__main__":
    main(sys.argv[1])
