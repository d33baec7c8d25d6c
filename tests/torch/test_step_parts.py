"""A plain loop's step split into forward, backward, the optimizer step, zero_grad and the rest,
with no change to the loop: each part within 5 points of the epoch of the test's own clock, plus
what the test's clock saw of the loop body outside every planted piece (the loop's own code, the
test's clocks, a busy machine's preemptions: the noise of this run, measured in it)."""

from __future__ import annotations

import time
from dataclasses import dataclass

import pytest
import torch

import perfkit
from perfkit.stages import StageWindow
from tests.planted_parts import TRUTH, SlowBackward, SlowSGD, sleep

TOLERANCE = 0.05


@dataclass
class Plan:
    forward_s: float = 0.0
    backward_s: float = 0.0
    optimizer_s: float = 0.0
    rest_s: float = 0.0
    steps: int = 24
    zero_grad_first: bool = False
    """``opt.zero_grad()`` before the forward, as most scripts write it (else after it)."""


def train(plan: Plan) -> StageWindow:
    """One epoch of a plain loop in ``perfkit.window``, each planted piece timed by ``TRUTH``."""
    TRUTH.reset()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
    opt = SlowSGD(model.parameters(), lr=0.01, step_s=plan.optimizer_s)
    data = [torch.randn(16, 64) for _ in range(plan.steps)]
    with perfkit.window("train", epoch=0, registry=perfkit.Registry(), console=False) as w:
        for x in w.iterate(data):
            body = time.perf_counter()
            if plan.zero_grad_first:
                with TRUTH.part("zero_grad"):
                    opt.zero_grad()
            with TRUTH.part("forward"):
                y = SlowBackward.apply(model(x), plan.backward_s)
                sleep(plan.forward_s)
                loss = y.pow(2).mean()
            if not plan.zero_grad_first:
                with TRUTH.part("zero_grad"):
                    opt.zero_grad()
            with TRUTH.part("backward"):
                loss.backward()
            opt.step()
            with TRUTH.part("rest"):
                sleep(plan.rest_s)
            TRUTH.seconds["body"] += time.perf_counter() - body
    assert w.window is not None
    return w.window


PLANTS = {
    "slow optimizer": Plan(optimizer_s=0.006),
    "slow backward": Plan(backward_s=0.006),
    "slow forward": Plan(forward_s=0.006),
    "slow code after the step": Plan(rest_s=0.006),
    "slow forward after zero_grad": Plan(forward_s=0.006, zero_grad_first=True),
    "slow backward after zero_grad": Plan(backward_s=0.006, zero_grad_first=True),
}


@pytest.mark.parametrize("plan", PLANTS.values(), ids=PLANTS.keys())
def test_each_part_is_within_five_points_of_the_tests_clock(plan: Plan) -> None:
    window = train(plan)
    parts = window.account.subjects["step"]
    wall = window.wall_s
    truth = dict(TRUTH.seconds)
    planted = sum(truth[p] for p in ("forward", "backward", "optimizer", "zero_grad", "rest"))
    noise = max(0.0, truth["body"] - planted) / wall
    for part in ("forward", "backward", "optimizer", "zero_grad", "rest"):
        assert abs(parts.get(part, 0.0) - truth[part]) / wall < TOLERANCE + noise, (part, parts, truth)
    assert sum(parts.values()) == pytest.approx(window.account.seconds("step"), rel=1e-6)


def test_the_parts_are_metrics_and_add_up_to_the_step() -> None:
    window = train(Plan(optimizer_s=0.002, steps=8))
    metrics = perfkit.stages.stage_metrics(window)
    step = metrics["perf/train/time/step_s"]
    parts = {k: v for k, v in metrics.items() if k.startswith("perf/train/time/step/") and k.endswith("_s")}
    assert set(parts) == {
        f"perf/train/time/step/{p}_s" for p in ("forward", "backward", "optimizer", "zero_grad", "rest")
    }
    assert sum(parts.values()) == pytest.approx(step)
    assert window.snapshot["train.step.optimizer"].count == 8  # one record a step


def test_a_loop_without_backward_has_its_steps_unsplit() -> None:
    with torch.no_grad():
        reg = perfkit.Registry()
        with perfkit.window("val", epoch=0, registry=reg, console=False) as w:
            for x in w.iterate([torch.randn(4, 4)] * 3):
                x.sum()
    assert w.window is not None
    assert "step" not in w.window.account.subjects
