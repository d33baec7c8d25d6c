"""A Lightning training step split into forward, backward, the optimizer step, zero_grad and the
rest, from Lightning's own actions and torch's hooks: automatic optimization (the closure runs
inside optimizer_step, counted once), an EMA in ``optimizer_step``, gradient accumulation, manual
optimization with two optimizers. Each part within 5 points of the epoch of the test's own clock."""

from __future__ import annotations

import time
from typing import Any

import lightning as L
import pytest
import torch
from perfkit_lightning import PerfMonitor
from torch.utils.data import DataLoader, TensorDataset

import perfkit
from tests.planted_parts import TRUTH, SlowBackward, SlowSGD, sleep

TOLERANCE = 0.05


class Planted(L.LightningModule):
    def __init__(self, *, forward_s: float = 0.0, backward_s: float = 0.0, optimizer_s: float = 0.0) -> None:
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(32, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
        self.forward_s, self.backward_s, self.optimizer_s = forward_s, backward_s, optimizer_s

    def loss(self, batch: Any) -> torch.Tensor:
        with TRUTH.part("forward"):
            y = SlowBackward.apply(self.net(batch[0]), self.backward_s)
            sleep(self.forward_s)
            return y.pow(2).mean()

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        return self.loss(batch)

    def on_before_backward(self, loss: torch.Tensor) -> None:
        self._backward_t0 = time.perf_counter()

    def on_after_backward(self) -> None:
        TRUTH.seconds["backward"] += time.perf_counter() - self._backward_t0

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return SlowSGD(self.parameters(), lr=0.01, step_s=self.optimizer_s)

    def train_dataloader(self) -> DataLoader[Any]:
        return DataLoader(TensorDataset(torch.randn(96, 32)), batch_size=4)


class WithEma(Planted):
    """An exponential moving average of the weights, updated in ``optimizer_step`` (a slow
    optimizer step that mixed precision or torch.compile would not help)."""

    def optimizer_step(self, *args: Any, **kwargs: Any) -> None:
        super().optimizer_step(*args, **kwargs)
        with TRUTH.part("optimizer"):
            sleep(0.006)


class Manual(Planted):
    """Manual optimization with two optimizers, each stepped every batch."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.automatic_optimization = False

    def training_step(self, batch: Any, batch_idx: int) -> None:
        with TRUTH.part("body"):  # the step's own code past the planted pieces: forward's, to perfkit
            first, second = self.optimizers()  # type: ignore[misc]
            loss = self.loss(batch)
            with TRUTH.part("zero_grad"):
                first.zero_grad()
                second.zero_grad()
            with TRUTH.part("backward"):
                self.manual_backward(loss)
            first.step()
            second.step()

    def on_before_backward(self, loss: torch.Tensor) -> None:
        pass  # the step above times its own backward

    def on_after_backward(self) -> None:
        pass

    def configure_optimizers(self) -> list[torch.optim.Optimizer]:  # type: ignore[override]
        half = len(list(self.net.parameters())) // 2
        params = list(self.net.parameters())
        return [
            SlowSGD(params[:half], lr=0.01, step_s=self.optimizer_s),
            SlowSGD(params[half:], lr=0.01, step_s=self.optimizer_s),
        ]


def fit(module: L.LightningModule, tmp: str, **trainer: Any) -> dict[str, float]:
    TRUTH.reset()
    monitor = PerfMonitor(console=False, sample_resources=False, save_run=False)
    with perfkit.use_registry(perfkit.Registry()):
        L.Trainer(
            max_epochs=1,
            callbacks=[monitor],
            logger=False,
            enable_progress_bar=False,
            enable_model_summary=False,
            enable_checkpointing=False,
            default_root_dir=tmp,
            **trainer,
        ).fit(module)
    return monitor.last_metrics["train"]


def check(metrics: dict[str, float], *, zero_grad_from_truth: bool = False) -> None:
    """Each part within ``TOLERANCE`` of the epoch of the test's clock, plus, where the test timed
    the whole step body (``TRUTH["body"]``), what its clock saw there outside every planted piece:
    the step's own code and a busy machine's preemptions, which perfkit counts as the step's
    forward (CI once read 17.7 ms of it in a 324 ms epoch)."""
    wall = metrics["perf/train/epoch_s"]
    truth = dict(TRUTH.seconds)
    planted = sum(truth.get(p, 0.0) for p in ("forward", "backward", "optimizer", "zero_grad"))
    noise = max(0.0, truth["body"] - planted) / wall if "body" in truth else 0.0
    for part in ("forward", "backward", "optimizer"):
        mine = metrics.get(f"perf/train/time/step/{part}_s", 0.0)
        assert abs(mine - truth.get(part, 0.0)) / wall < TOLERANCE + noise, (part, mine, truth, wall)
    parts = [v for k, v in metrics.items() if k.startswith("perf/train/time/step/") and k.endswith("_s")]
    assert sum(parts) == pytest.approx(metrics["perf/train/time/step_s"])
    if zero_grad_from_truth:
        mine = metrics.get("perf/train/time/step/zero_grad_s", 0.0)
        assert abs(mine - truth["zero_grad"]) / wall < TOLERANCE + noise


CASES = {
    "slow optimizer": (Planted, {"optimizer_s": 0.006}, {}),
    "slow backward": (Planted, {"backward_s": 0.006}, {}),
    "slow forward": (Planted, {"forward_s": 0.006}, {}),
    "an EMA in optimizer_step": (WithEma, {}, {}),
    "gradient accumulation over 3 batches": (Planted, {"optimizer_s": 0.012}, {"accumulate_grad_batches": 3}),
}


@pytest.mark.parametrize(("make", "plant", "trainer"), CASES.values(), ids=CASES.keys())
def test_automatic_optimization_counts_each_part_once(
    tmp_path: Any, make: type[Planted], plant: dict[str, float], trainer: dict[str, Any]
) -> None:
    metrics = fit(make(**plant), str(tmp_path), **trainer)
    check(metrics)


def test_gradient_accumulation_steps_the_optimizer_once_a_cycle(tmp_path: Any) -> None:
    metrics = fit(Planted(), str(tmp_path), accumulate_grad_batches=3)
    assert metrics["perf/train/steps"] == 24
    assert metrics["perf/train/optimizer_steps"] == 8


def test_manual_optimization_with_two_optimizers(tmp_path: Any) -> None:
    metrics = fit(Manual(optimizer_s=0.003, backward_s=0.003), str(tmp_path))
    check(metrics, zero_grad_from_truth=True)
