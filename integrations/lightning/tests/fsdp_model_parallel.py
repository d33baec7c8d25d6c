"""A two-process Lightning fit sharded with FSDP2 (``ModelParallelStrategy``: ``fully_shard`` per layer in
``configure_model``) on CPU over gloo, with ``PerfMonitor``; rank 1's training step is slower.

    python fsdp_model_parallel.py OUT_DIR

Before Lightning or perfkit wraps anything, the job puts its own clock around the collectives FSDP2
calls (``all_gather_single``, ``reduce_scatter_single``: synchronous on CPU, the call is the rank's
wait), with the phase the module's own hooks say the step is in (forward from ``training_step`` on,
backward from ``on_before_backward``). Each rank writes what its clock saw per epoch
(``truth_rank{R}.json``: the epoch's wall time from its start hook to its end hook, the waits by
phase and collective); rank 0 writes the run directory under OUT_DIR.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import lightning as L
import torch
import torch.distributed as dist
from lightning.pytorch.strategies import ModelParallelStrategy
from perfkit_lightning import PerfMonitor
from torch.distributed.fsdp import fully_shard
from torch.utils.data import DataLoader, TensorDataset

SLOW_RANK, PLANTED_S, WIDTH, EPOCHS = 1, 0.02, 256, 3
PHASE = ["idle"]
WAITS: dict[str, float] = {}


def clocked() -> None:
    """The job's own clock around FSDP2's collectives, installed before anyone else's."""
    for name, collective in (
        ("all_gather_single", "all_gather"),
        ("reduce_scatter_single", "reduce_scatter"),
    ):
        original = getattr(dist, name)

        def timed(*args: Any, _f: Callable[..., Any] = original, _c: str = collective, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return _f(*args, **kwargs)
            finally:
                key = f"{PHASE[0]}.{_c}"
                WAITS[key] = WAITS.get(key, 0.0) + time.perf_counter() - t0

        setattr(dist, name, timed)


class Sharded(L.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.layers = torch.nn.Sequential(*[torch.nn.Linear(WIDTH, WIDTH) for _ in range(4)])
        self.epochs: list[dict[str, Any]] = []
        self._start = 0.0

    def configure_model(self) -> None:
        mesh = self.device_mesh["data_parallel"]
        for layer in self.layers:
            fully_shard(layer, mesh=mesh)
        fully_shard(self.layers, mesh=mesh)

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        PHASE[0] = "forward"
        if self.global_rank == SLOW_RANK:
            time.sleep(PLANTED_S)
        loss: torch.Tensor = self.layers(batch[0]).square().mean()
        return loss

    def on_before_backward(self, loss: torch.Tensor) -> None:
        PHASE[0] = "backward"

    def on_after_backward(self) -> None:
        PHASE[0] = "optimizer"

    def on_train_batch_end(self, *args: Any) -> None:
        PHASE[0] = "idle"

    def on_train_epoch_start(self) -> None:
        WAITS.clear()
        self._start = time.perf_counter()

    def on_train_epoch_end(self) -> None:
        self.epochs.append({"wall_s": time.perf_counter() - self._start, "waits": dict(WAITS)})

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.01)

    def train_dataloader(self) -> DataLoader[Any]:
        return DataLoader(TensorDataset(torch.randn(256, WIDTH)), batch_size=16)


def main(out: str) -> None:
    torch.set_num_threads(1)
    clocked()
    module = Sharded()
    trainer = L.Trainer(
        accelerator="cpu",
        devices=2,
        strategy=ModelParallelStrategy(data_parallel_size=2, tensor_parallel_size=1),
        max_epochs=EPOCHS,
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        enable_checkpointing=False,
        callbacks=[PerfMonitor(sample_resources=False, run_dir=f"{out}/run", console=False)],
    )
    trainer.fit(module)
    Path(out, f"truth_rank{trainer.global_rank}.json").write_text(json.dumps(module.epochs))
    if dist.is_initialized():
        dist.barrier()  # the ranks end together, before the interpreter's teardown
        dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1])
