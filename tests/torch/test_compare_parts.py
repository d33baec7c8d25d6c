"""``perfkit compare`` names the part one level deeper that a change moved: run A's optimizer step
does extra work after each step (an EMA of the weights, planted as a sleep), run B drops it; the
comparison says the step saved time and, of it, the optimizer step, within the noise of what the
test's own clock measured the optimizer's step to save."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import torch

import perfkit
from perfkit._cli import main
from perfkit.findings import compare_runs
from perfkit.run import RunWriter, read_run
from tests.planted_parts import TRUTH, SlowSGD

STEPS = 24
EPOCHS = 5  # four settled epochs a run: their spread is the noise band on a busy machine


def train(run_dir: Path, optimizer_s: float) -> float:
    """``EPOCHS`` epochs of a plain loop into ``run_dir``, on one torch thread (a tiny model on two
    spins on a busy machine: its 10 ms epochs took 575 ms beside another test's workers); the
    optimizer step's seconds per step past the first epoch, by the test's own clock around
    ``opt.step()``."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
    opt = SlowSGD(model.parameters(), lr=0.01, step_s=optimizer_s)
    data = [torch.randn(16, 64) for _ in range(STEPS)]
    reg, writer = perfkit.Registry(), RunWriter(run_dir)
    stepping, threads = 0.0, torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        for epoch in range(EPOCHS):
            with perfkit.window("train", epoch=epoch, registry=reg, run=writer, console=False) as w:
                for x in w.iterate(data):
                    loss = model(x).pow(2).mean()
                    opt.zero_grad()
                    loss.backward()
                    t0 = time.perf_counter()
                    opt.step()
                    if epoch:
                        stepping += time.perf_counter() - t0
    finally:
        torch.set_num_threads(threads)
    writer.finish(reg.snapshot())
    return stepping / ((EPOCHS - 1) * STEPS)


def test_compare_names_the_optimizer_step_inside_the_step_that_saved(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    TRUTH.reset()
    slow = train(tmp_path / "a", optimizer_s=0.008)
    fast = train(tmp_path / "b", optimizer_s=0.0)
    c = compare_runs(read_run(tmp_path / "a"), read_run(tmp_path / "b"))
    assert c.conclusion == "IMPROVEMENT"
    assert c.because is not None
    assert c.because.part == "step"
    assert c.within is not None
    assert c.within.part == "step.optimizer"
    # what the test's clock saw the optimizer step save, per step, against perfkit's part
    assert c.within.change_s == pytest.approx(fast - slow, abs=c.within.noise_s)
    assert ", of it the optimizer " in c.line
    assert main(["compare", str(tmp_path / "a"), str(tmp_path / "b")]) == 0
    assert ", of it the optimizer " in capsys.readouterr().out


def test_a_change_the_steps_parts_do_not_locate_names_none(tmp_path: Path) -> None:
    """Two runs alike: nothing beyond the noise, no part named one level deeper."""
    train(tmp_path / "a", optimizer_s=0.0)
    train(tmp_path / "b", optimizer_s=0.0)
    c = compare_runs(read_run(tmp_path / "a"), read_run(tmp_path / "b"))
    if c.because is None:
        assert c.within is None
    else:  # a busy machine moved a part beyond its noise band: what it names is inside it
        assert c.within is None or c.within.part.startswith(f"{c.because.part}.")
