"""Datasets, a collate and loader factories for the loader trial's tests, importable by spawned
workers and by ``perfkit trial MODULE:FACTORY`` run in a subprocess (no Lightning here: a spawned
worker imports this module; the datamodule is in ``trial_datamodule``)."""

from __future__ import annotations

import time

import torch
from torch.utils.data import DataLoader, Dataset, TensorDataset


class Sleepy(Dataset[torch.Tensor]):
    """Each item sleeps ``item_s`` (a disk, a network): workers overlap the sleeps."""

    def __init__(self, n: int = 400, item_s: float = 0.004) -> None:
        self.n, self.item_s = n, item_s

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> torch.Tensor:
        time.sleep(self.item_s)
        return torch.full((4,), float(i))


class Busy(Dataset[torch.Tensor]):
    """Each item spins the CPU ``item_s``: only cores make it faster, and workers past them share them."""

    def __init__(self, n: int = 400, item_s: float = 0.002) -> None:
        self.n, self.item_s = n, item_s

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> torch.Tensor:
        end = time.thread_time() + self.item_s
        while time.thread_time() < end:
            pass
        return torch.full((4,), float(i))


def busy_collate(items: list[torch.Tensor]) -> torch.Tensor:
    """Spins the CPU for 8 ms a batch: only cores can make it faster."""
    end = time.thread_time() + 0.008
    while time.thread_time() < end:
        pass
    return torch.stack(items)


def cheap() -> DataLoader[tuple[torch.Tensor, ...]]:
    """A loader whose batches cost microseconds."""
    x = torch.arange(4096.0).reshape(-1, 4)
    return DataLoader(TensorDataset(x), batch_size=8)


def sleepy() -> DataLoader[torch.Tensor]:
    return DataLoader(Sleepy(200, 0.002), batch_size=4)


def not_a_loader() -> list[int]:
    return [1, 2, 3]
