"""A four-process DDP fit over gloo in which rank 3's training step computes 40 ms longer.

    python ddp_compute_straggler.py OUT_DIR

Every rank's data is as fast, and the other ranks wait for rank 3 inside backward, so their steps
are as long as its. Each rank writes what its own clocks saw (``truth_rank{R}.json``: its planted
time and the epoch's wall time); rank 0 writes the run directory under OUT_DIR.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

sys.path.insert(0, str(Path(__file__).resolve().parent))

from perfkit_lightning import PerfMonitor
from planted import TRUTH, Plan, Planted, fit, plant  # type: ignore[import-not-found]

SLOW_RANK = 3
PLANTED_S = 0.04


class SlowRank(Planted):
    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        if self.global_rank == SLOW_RANK:
            plant("train", PLANTED_S)
        return super().training_step(batch, batch_idx)  # type: ignore[no-any-return]


def main(out: str) -> None:
    monitor = PerfMonitor(sample_resources=False, run_dir=f"{out}/run", top_k_slowest=0)
    fit(Plan(train_n=160), out, [monitor], module=SlowRank, devices=4, strategy="ddp", limit_val_batches=0)
    rank = dist.get_rank() if dist.is_initialized() else 0
    epochs = range(len(TRUTH.ends["train"]))
    truth = {
        "wall": [TRUTH.wall("train", k) for k in epochs],
        "planted": [sum(TRUTH.inside(TRUTH.planted["train"], "train", k)) for k in epochs],
    }
    Path(out, f"truth_rank{rank}.json").write_text(json.dumps(truth))
    if dist.is_initialized():
        dist.barrier()  # the ranks end together, before the interpreter's teardown
        dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1])
