"""Datasets and hooks for the DataLoader worker tests, in a module spawned workers can import."""

from __future__ import annotations

import os
import signal
import time

import torch
from torch.utils.data import Dataset, IterableDataset

import perfkit

INIT_MARK: list[int] = []


class Squares(Dataset[torch.Tensor]):
    """``n`` items; each ``__getitem__`` is timed and has a nested section."""

    def __init__(self, n: int = 12, *, fail_at: int | None = None, kill_at: int | None = None) -> None:
        self.n, self.fail_at, self.kill_at = n, fail_at, kill_at

    def __len__(self) -> int:
        return self.n

    @perfkit.timed("getitem")
    def __getitem__(self, i: int) -> torch.Tensor:
        if i == self.fail_at:
            raise ValueError(f"corrupt sample {i}")
        if i == self.kill_at:
            os.kill(os.getpid(), signal.SIGKILL)
        with perfkit.section("transform"):
            return torch.full((4,), float(i * i))


class Stream(IterableDataset[torch.Tensor]):
    """An iterable dataset of ``n`` items, split between workers."""

    def __init__(self, n: int = 12) -> None:
        self.n = n

    def __iter__(self):  # type: ignore[no-untyped-def]
        info = torch.utils.data.get_worker_info()
        start, step = (info.id, info.num_workers) if info else (0, 1)
        for i in range(start, self.n, step):
            with perfkit.section("produce"):
                item = torch.tensor([float(i)])
            yield item


@perfkit.timed("collate")
def collate(items: list[torch.Tensor]) -> torch.Tensor:
    return torch.stack(items)


def mark_init(worker_id: int) -> None:
    """A user's own worker_init_fn: leaves a trace that the dataset can report."""
    INIT_MARK.append(100 + worker_id)


class ReportsInit(Dataset[int]):
    def __len__(self) -> int:
        return 4

    def __getitem__(self, i: int) -> int:
        return INIT_MARK[-1] if INIT_MARK else -1


def square(i: int) -> torch.Tensor:
    """A torchdata map function: one item (5 ms, so that both workers get some), timed as
    ``getitem`` with a nested section."""
    with perfkit.section("getitem"), perfkit.section("transform"):
        time.sleep(0.005)
        return torch.full((4,), float(i * i))


class OwnWorkers(torch.utils.data.DataLoader):  # type: ignore[type-arg]
    """A DataLoader subclass with a worker loop of its own (a process pool that calls the dataset
    and the collate function): torch's worker loop, its fetcher and ``worker_init_fn`` never run."""

    def __iter__(self):  # type: ignore[no-untyped-def]
        import multiprocessing

        n = len(self.dataset)  # type: ignore[arg-type]
        chunks = [list(range(i, min(i + self.batch_size, n))) for i in range(0, n, self.batch_size)]  # type: ignore[operator]
        with multiprocessing.get_context("fork").Pool(2) as pool:
            yield from pool.imap(_OwnBatch(self.dataset, self.collate_fn), chunks)


class _OwnBatch:
    def __init__(self, dataset, collate):  # type: ignore[no-untyped-def]
        self.dataset, self.collate = dataset, collate

    def __call__(self, indexes):  # type: ignore[no-untyped-def]
        return self.collate([self.dataset[i] for i in indexes])


@perfkit.timed("decode")
def decode(sample: dict[str, bytes]) -> torch.Tensor:
    """A WebDataset map stage: one sample's bytes to a tensor, run in the loader's workers."""
    return torch.tensor([float(sample["x.txt"])])
