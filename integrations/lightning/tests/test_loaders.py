"""Lightning loops over loaders beyond torch's DataLoader: each one is timed, or a warning says which not."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
import torch
from perfkit_lightning import PerfMonitor

import perfkit

from .tiny import Numbers, Tiny, trainer

pytest.importorskip("torchdata", reason="torchdata is an optional extra: pip install 'perfkit[torchdata]'")


def pair(i: int) -> tuple[torch.Tensor, torch.Tensor]:
    time.sleep(0.002)
    x = torch.full((4,), float(i))
    return x, 3 * x.sum(0, keepdim=True) + 1


def collate_pairs(items: list[tuple[torch.Tensor, torch.Tensor]]) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.stack([a for a, _ in items]), torch.stack([b for _, b in items])


class Stateful(Tiny):
    def train_dataloader(self) -> Any:
        from torchdata.stateful_dataloader import StatefulDataLoader

        return StatefulDataLoader(Numbers(32), batch_size=4, num_workers=2, multiprocessing_context="fork")


class Nodes(Tiny):
    def train_dataloader(self) -> Any:
        from torchdata.nodes import Batcher, IterableWrapper, Loader, Mapper, ParallelMapper

        items = ParallelMapper(
            IterableWrapper(range(32)),
            map_fn=pair,
            num_workers=2,
            method="process",
            multiprocessing_context="fork",
        )  # type: ignore[arg-type]
        return Loader(Mapper(Batcher(items, batch_size=4), collate_pairs))


class PlainIterable:
    """Not a DataLoader, not torchdata: a plain iterable of batches."""

    def __iter__(self):  # type: ignore[no-untyped-def]
        for i in range(8):
            time.sleep(0.003)
            yield collate_pairs([pair(4 * i + k) for k in range(4)])

    def __len__(self) -> int:
        return 8


class Plain(Tiny):
    def train_dataloader(self) -> Any:
        return PlainIterable()


@pytest.mark.parametrize(("module", "workers"), [(Stateful, 2.0), (Nodes, 2.0), (Plain, None)])
def test_every_loader_the_loop_uses_is_timed(
    tmp_path: Path, module: type[Tiny], workers: float | None
) -> None:
    monitor = PerfMonitor(sample_resources=False, save_run=False)
    with perfkit.use_registry(perfkit.Registry()):
        trainer(str(tmp_path), [monitor], logger=False, max_epochs=2, limit_val_batches=0).fit(module())
    m = monitor.last_metrics["train"]
    assert m["perf/train/steps"] == 8.0
    assert m["perf/train/data_wait_ms_mean"] > 0
    assert m["perf/train/time/data_wait_s"] > 0
    assert m.get("perf/train/workers") == workers
