"""A real LightningDataModule for ``perfkit trial``'s datamodule path."""

from __future__ import annotations

import lightning as L
import torch
from torch.utils.data import DataLoader, TensorDataset


class Data(L.LightningDataModule):
    """A datamodule whose loaders exist only after ``setup("fit")``."""

    def setup(self, stage: str) -> None:
        self.train_set = TensorDataset(torch.zeros(64, 4))
        self.val_set = TensorDataset(torch.zeros(24, 4))

    def train_dataloader(self) -> DataLoader[tuple[torch.Tensor, ...]]:
        return DataLoader(self.train_set, batch_size=8)

    def val_dataloader(self) -> DataLoader[tuple[torch.Tensor, ...]]:
        return DataLoader(self.val_set, batch_size=6)
