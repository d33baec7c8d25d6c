"""A two-process DDP fit over gloo, run as its own script (the way `strategy="ddp"` launches ranks).

    python ddp_job.py OUT_DIR

Each rank's validation set differs in size on purpose (uneven batch counts);
rank 0 writes metrics.csv and the run directory under OUT_DIR.
"""

from __future__ import annotations

import sys
from pathlib import Path

import lightning as L
import torch
from lightning.pytorch.loggers import CSVLogger

sys.path.insert(0, str(Path(__file__).resolve().parent))

from perfkit_lightning import PerfMonitor, ProfilerCallback
from tiny import Tiny


class SlowRankOne(Tiny):
    """Rank 1 does more work per validation step, so there is a slowest rank to find.

    (In training the fast rank would wait for the slow one inside the gradient all-reduce,
    so both ranks' training steps take about as long: validation has no such sync.)
    """

    def validation_step(self, batch, batch_idx):  # type: ignore[no-untyped-def]
        if self.global_rank == 1:
            torch.linalg.inv(torch.randn(500, 500) + 500 * torch.eye(500))  # real work, not a sleep
        return super().validation_step(batch, batch_idx)


def main(out: str) -> None:
    torch.set_num_threads(1)
    trainer = L.Trainer(
        accelerator="cpu",
        devices=2,
        strategy="ddp",
        max_epochs=2,
        logger=CSVLogger(out, name="ddp"),
        callbacks=[
            PerfMonitor(sample_resources=False, top_k_slowest=2),
            ProfilerCallback(
                profile_epochs=[1],
                profile_steps=2,
                warmup_steps=1,
                stages=["train"],
                output_dir=f"{out}/traces",
            ),
        ],
        enable_progress_bar=False,
        enable_model_summary=False,
        enable_checkpointing=False,
        num_sanity_val_steps=0,
        default_root_dir=out,
    )
    trainer.fit(SlowRankOne(train_n=32, val_n=16, batch_size=4))


if __name__ == "__main__":
    main(sys.argv[1])
