"""The smallest useful PerfMonitor set-up: one callback, per-epoch performance metrics in metrics.csv."""

import lightning as L
import torch
from lightning.pytorch.loggers import CSVLogger
from perfkit_lightning import PerfMonitor
from torch.utils.data import DataLoader, TensorDataset

import perfkit


class Regression(L.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))

    def training_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> torch.Tensor:
        x, y = batch
        with perfkit.section("forward"):  # any section shows up as perf/train/series/forward/...
            prediction = self.net(x)
        return torch.nn.functional.mse_loss(prediction, y)

    def validation_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> None:
        x, y = batch
        self.log("val_loss", torch.nn.functional.mse_loss(self.net(x), y))

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.Adam(self.parameters(), lr=1e-3)


def loader(n: int) -> DataLoader[tuple[torch.Tensor, ...]]:
    x = torch.randn(n, 16)
    return DataLoader(TensorDataset(x, x.sum(1, keepdim=True)), batch_size=32, num_workers=2)


def main() -> None:
    logger = CSVLogger("lightning_logs", name="minimal")
    trainer = L.Trainer(
        max_epochs=2, logger=logger, callbacks=[PerfMonitor(console=True)], enable_progress_bar=False
    )
    trainer.fit(Regression(), loader(1024), loader(256))
    print(f"metrics: {logger.log_dir}/metrics.csv   run data: {logger.log_dir}/perfkit")


if __name__ == "__main__":
    main()
