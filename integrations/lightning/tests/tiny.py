"""A tiny LightningModule with all four stages, importable by tests and by the DDP job script."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import lightning as L
import torch
from lightning.pytorch.loggers import Logger
from perfkit_lightning import tag_step
from torch.utils.data import DataLoader, Dataset, TensorDataset

import perfkit


class Numbers(Dataset[tuple[torch.Tensor, torch.Tensor]]):
    """x -> 3x + 1, each item timed as ``getitem`` (recorded in DataLoader workers when there are some)."""

    def __init__(self, n: int) -> None:
        g = torch.Generator().manual_seed(n)
        self.x = torch.randn(n, 4, generator=g)

    def __len__(self) -> int:
        return len(self.x)

    @perfkit.timed("getitem")
    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.x[i], 3 * self.x[i].sum(0, keepdim=True) + 1


class Tiny(L.LightningModule):
    def __init__(
        self,
        *,
        train_n: int = 32,
        val_n: int = 16,
        batch_size: int = 4,
        workers: int = 0,
        context: str | None = None,
    ) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(4, 1)
        self.sizes = {"train": train_n, "val": val_n, "test": 8, "predict": 8}
        self.batch_size, self.workers, self.context = batch_size, workers, context

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with perfkit.section("forward"):
            return self.layer(x)

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        x, y = batch
        tag_step(rows=len(x), batch=batch_idx)
        loss = torch.nn.functional.mse_loss(self(x), y)
        self.log("train_loss", loss, on_epoch=True, on_step=False)
        return loss

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        x, y = batch
        self.log("val_loss", torch.nn.functional.mse_loss(self(x), y))

    def test_step(self, batch: Any, batch_idx: int) -> None:
        x, y = batch
        self.log("test_loss", torch.nn.functional.mse_loss(self(x), y))

    def predict_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        return self(batch[0])

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.05)

    def _loader(self, stage: str) -> DataLoader[Any]:
        workers = self.workers if stage != "predict" else 0
        return DataLoader(
            Numbers(self.sizes[stage]),
            batch_size=self.batch_size,
            num_workers=workers,
            multiprocessing_context=self.context if workers else None,
            persistent_workers=workers > 0,
        )

    def train_dataloader(self) -> DataLoader[Any]:
        return self._loader("train")

    def val_dataloader(self) -> DataLoader[Any]:
        return self._loader("val")

    def test_dataloader(self) -> DataLoader[Any]:
        return self._loader("test")

    def predict_dataloader(self) -> DataLoader[Any]:
        return self._loader("predict")


class EmptyVal(Tiny):
    def val_dataloader(self) -> DataLoader[Any]:
        return DataLoader(TensorDataset(torch.zeros(0, 4), torch.zeros(0, 1)), batch_size=4)


class BrokenLogger(Logger):
    """A logger whose backend is down: every call with perfkit's metrics raises (``calls`` counts them)."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    @property
    def name(self) -> str:
        return "broken"

    @property
    def version(self) -> str:
        return "0"

    def log_hyperparams(self, params: Any, *args: Any, **kwargs: Any) -> None:
        pass

    def log_metrics(self, metrics: dict[str, float], step: int | None = None) -> None:
        if any(k.startswith("perf/") for k in metrics):
            self.calls += 1
            raise ConnectionError("tracking server unreachable")


def trainer(tmp: str, callbacks: list[Any], **kwargs: Any) -> L.Trainer:
    options: dict[str, Any] = {
        "max_epochs": 2,
        "accelerator": "cpu",
        "devices": 1,
        "enable_progress_bar": False,
        "enable_model_summary": False,
        "enable_checkpointing": False,
        "log_every_n_steps": 1,
        "num_sanity_val_steps": 2,
        "default_root_dir": tmp,
    }
    options.update(kwargs)
    return L.Trainer(callbacks=callbacks, **options)


class Said(logging.Handler):
    """The lines perfkit's callbacks log (to ``perfkit.lightning``, or Lightning's child logger)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())

    @property
    def text(self) -> str:
        return "\n".join(self.lines)


@contextmanager
def said() -> Iterator[Said]:
    """Collect what perfkit's callbacks log inside the block."""
    handler = Said()
    logs = [logging.getLogger(name) for name in ("perfkit.lightning", "lightning.pytorch.perfkit")]
    levels = [log.level for log in logs]
    for log in logs:
        log.addHandler(handler)
        log.setLevel(logging.DEBUG)  # whatever level an earlier test left the root at
    try:
        yield handler
    finally:
        for log, level in zip(logs, levels, strict=True):
            log.removeHandler(handler)
            log.setLevel(level)
