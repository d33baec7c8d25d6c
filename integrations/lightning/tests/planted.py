"""Planted bottlenecks in small real Lightning fits, with the truth measured by the test's own clocks.

Every scenario is a tiny LightningModule whose loaders are ``TruthLoader``s: a DataLoader
subclass that times, with its own ``time.perf_counter``, each ``iter()`` and each ``next()``
the loop makes on it (the wait for a batch). Planted code times itself the same way. Two
``Bounds`` callbacks, listed first and last, stamp each stage epoch's start and end. None of
this reads anything perfkit measured: the tests compare perfkit's verdicts with these clocks.
"""

from __future__ import annotations

import gc
import time
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import lightning as L
import torch
from lightning.pytorch.callbacks import Callback
from torch.utils.data import DataLoader, Dataset

import perfkit


@dataclass
class Truth:
    """What the test's own clocks saw, per stage: waits, iter() calls, planted time, epoch bounds."""

    waits: dict[str, list[tuple[float, float]]] = field(default_factory=lambda: defaultdict(list))
    iters: dict[str, list[tuple[float, float]]] = field(default_factory=lambda: defaultdict(list))
    planted: dict[str, list[tuple[float, float]]] = field(default_factory=lambda: defaultdict(list))
    starts: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    ends: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))

    def epoch(self, stage: str, k: int = -1) -> tuple[float, float]:
        """Stage epoch ``k``: from its loader's iter() (or its first hook) to its last hook."""
        k = k % len(self.ends[stage])
        end, start = self.ends[stage][k], self.starts[stage][k]
        previous = self.ends[stage][k - 1] if k > 0 else float("-inf")
        before = [t0 for t0, _ in self.iters[stage] if previous < t0 <= start]
        return (min(start, before[0]) if before else start), end

    def wall(self, stage: str, k: int = -1) -> float:
        """The epoch's wall time, minus other stages run inside it (validation inside training)."""
        t0, t1 = self.epoch(stage, k)
        nested = sum(
            e - s
            for other in self.ends
            if other != stage
            for s, e in (self.epoch(other, i) for i in range(len(self.ends[other])))
            if t0 <= s and e <= t1
        )
        return t1 - t0 - nested

    def inside(self, spans: list[tuple[float, float]], stage: str, k: int = -1) -> list[float]:
        t0, t1 = self.epoch(stage, k)
        return [b - a for a, b in spans if t0 <= a and b <= t1]

    def share(self, kind: str, stage: str, k: int = -1, *, what: str | None = None) -> float:
        """Seconds of ``kind`` (waits, iters, planted: ``what`` names a planted cost) in stage epoch
        ``k``, over its wall time."""
        spans = getattr(self, kind)[what or stage]
        return sum(self.inside(spans, stage, k)) / self.wall(stage, k)


TRUTH = Truth()


def clock_in(kind: str, stage: str, t0: float) -> None:
    getattr(TRUTH, kind)[stage].append((t0, time.perf_counter()))


class TruthIter:
    """The loader's own iterator, with each ``next()`` timed by the test."""

    def __init__(self, it: Iterator[Any], stage: str) -> None:
        self.it, self.stage = it, stage

    def __iter__(self) -> TruthIter:
        return self

    def __next__(self) -> Any:
        t0 = time.perf_counter()
        item = next(self.it)  # StopIteration is not a wait for a batch
        clock_in("waits", self.stage, t0)
        return item

    def __len__(self) -> int:
        return len(self.it)  # type: ignore[arg-type]


class TruthLoader(DataLoader[Any]):
    """A DataLoader whose ``iter()`` and ``next()`` are timed by the test (``stage`` names it)."""

    stage = "train"

    def __iter__(self) -> Any:
        t0 = time.perf_counter()
        it = TruthIter(super().__iter__(), self.stage)
        clock_in("iters", self.stage, t0)
        return it


def truth_loader(stage: str, dataset: Dataset[Any], **kwargs: Any) -> TruthLoader:
    loader = TruthLoader(dataset, **kwargs)
    loader.stage = stage
    return loader


class Bounds(Callback):
    """Stamps stage epochs: ``first`` at the start hooks (list it first), else at the end hooks (last)."""

    def __init__(self, first: bool) -> None:
        self.first = first

    def _at(self, trainer: L.Trainer, stage: str, start: bool) -> None:
        if trainer.sanity_checking or start != self.first:
            return
        (TRUTH.starts if start else TRUTH.ends)[stage].append(time.perf_counter())

    def on_train_epoch_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._at(trainer, "train", True)

    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._at(trainer, "train", False)

    def on_validation_epoch_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._at(trainer, "val", True)

    def on_validation_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._at(trainer, "val", False)


def plant(what: str, seconds: float) -> None:
    """Sleep ``seconds`` (a planted cost that uses no CPU), timed as planted cost ``what``."""
    t0 = time.perf_counter()
    time.sleep(seconds)
    clock_in("planted", what, t0)


class Rows(Dataset[tuple[torch.Tensor, torch.Tensor]]):
    """``n`` rows of 8 features; ``getitem_s`` of planted time per item, in whatever process loads it."""

    def __init__(self, n: int, getitem_s: float = 0.0) -> None:
        self.x = torch.randn(n, 8, generator=torch.Generator().manual_seed(n))
        self.getitem_s = getitem_s

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        if self.getitem_s:
            time.sleep(self.getitem_s)
        return self.x[i], self.x[i].sum(0, keepdim=True)


SLOW_COLLATE_S = 0.06
"""What ``slow_collate`` plants per batch: a worker's time to make one."""


def slow_collate(items: list[tuple[torch.Tensor, torch.Tensor]]) -> tuple[torch.Tensor, torch.Tensor]:
    with perfkit.section("slow_collate"):
        time.sleep(SLOW_COLLATE_S)
        return torch.stack([x for x, _ in items]), torch.stack([y for _, y in items])


def slow_init(worker_id: int) -> None:
    time.sleep(0.4)


@dataclass
class Plan:
    """What a scenario plants (all times in seconds)."""

    train_n: int = 48
    val_n: int = 16
    batch: int = 4
    train_step_s: float = 0.0
    train_step_section: str | None = None
    val_step_s: float = 0.0
    val_step_section: str | None = None
    train_getitem_s: float = 0.0
    val_getitem_s: float = 0.0
    workers: int = 0
    persistent: bool = True
    collate: Any = None
    worker_init: Any = None
    compute: int = 0  # size of real matrix work per step (0: none)


class Planted(L.LightningModule):
    """A linear model whose steps and loaders do what ``plan`` says."""

    def __init__(self, plan: Plan) -> None:
        super().__init__()
        self.plan = plan
        self.layer = torch.nn.Linear(8, 1)

    def _work(self, stage: str, seconds: float, section: str | None) -> None:
        if self.plan.compute:
            a = torch.randn(self.plan.compute, self.plan.compute)
            for _ in range(4):
                a = torch.tanh(a @ a) / self.plan.compute
        if not seconds:
            return
        if section is None:
            plant(stage, seconds)
        else:
            with perfkit.section(section):
                plant(stage, seconds)

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        x, y = batch
        self._work("train", self.plan.train_step_s, self.plan.train_step_section)
        return torch.nn.functional.mse_loss(self.layer(x), y)

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        x, _ = batch
        self.layer(x)
        self._work("val", self.plan.val_step_s, self.plan.val_step_section)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.01)

    def _loader(self, stage: str, n: int, getitem_s: float) -> TruthLoader:
        p = self.plan
        return truth_loader(
            stage,
            Rows(n, getitem_s),
            batch_size=p.batch,
            num_workers=p.workers,
            collate_fn=p.collate,
            worker_init_fn=p.worker_init,
            multiprocessing_context="fork" if p.workers else None,
            persistent_workers=p.persistent if p.workers else False,
        )

    def train_dataloader(self) -> TruthLoader:
        return self._loader("train", self.plan.train_n, self.plan.train_getitem_s)

    def val_dataloader(self) -> TruthLoader:
        return self._loader("val", self.plan.val_n, self.plan.val_getitem_s)


def fit(
    plan: Plan, tmp: str, callbacks: list[Callback], *, module: type[Planted] = Planted, **trainer: Any
) -> None:
    """Fit ``module(plan)`` for 2 epochs with the truth clocks around ``callbacks``."""
    TRUTH.__init__()  # type: ignore[misc]
    options: dict[str, Any] = {
        "max_epochs": 2,
        "accelerator": "cpu",
        "devices": 1,
        "logger": False,
        "enable_progress_bar": False,
        "enable_model_summary": False,
        "enable_checkpointing": False,
        "num_sanity_val_steps": 0,
        "default_root_dir": tmp,
    }
    options.update(trainer)
    torch.set_num_threads(1)
    # The whole suite's heap is old objects: a full collection inside the fit (tens of ms in CI, at
    # an epoch's end inside the truth's bounds and outside perfkit's window) is the test process's
    # noise, not the planted run's. Frozen, they are not traversed.
    gc.collect()
    gc.freeze()
    try:
        with perfkit.use_registry(perfkit.Registry()):
            L.Trainer(callbacks=[Bounds(first=True), *callbacks, Bounds(first=False)], **options).fit(
                module(plan)
            )
    finally:
        gc.unfreeze()
