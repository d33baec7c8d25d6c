"""Planted scenarios of the data side and of memory: several loaders in one stage (two validation
sets on a Lightning fit, two loaders in one ``perfkit.window`` of a script), an input-bound
validation loader, and a training step that leaks.

The truth is the test's own clocks (``planted``) and, for memory, its own RSS readings (psutil).
In each: the first verdict names the planted cause, its share is within 5 points of the truth,
the shares of one stage epoch's verdicts add up to at most the epoch (``run`` asserts it), and no
verdict claims a cause that is not there."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
import pytest
import torch
from lightning.pytorch.callbacks import Callback
from perfkit_lightning import PerfMonitor

import perfkit
from perfkit.findings import Diagnosis, diagnose, diagnose_windows
from perfkit.run import read_run

from .planted import TRUTH, Plan, Planted, Rows, fit, plant, truth_loader
from .test_verdicts import Check, only_causes, run, truth_check
from .test_verdicts_outside import within_each_epoch

TOLERANCE = 0.05


@pytest.fixture
def against_truth(record_property: Callable[[str, object], None]) -> Check:
    """As ``test_verdicts.against_truth``, within 5 points."""

    return truth_check(record_property, TOLERANCE)


class SlowRows(Rows):
    """Rows whose items take 10 ms each to make, in whatever process loads them."""

    def __init__(self, n: int) -> None:
        super().__init__(n, getitem_s=0.01)


def loader_truth(key: str, stage: str) -> float:
    """The steady wait of one loader (its truth clock ``key``) in the last ``stage`` epoch, over the
    epoch: its waits, less what its first batch waited beyond its other batches (the start's)."""
    waits = TRUTH.inside(TRUTH.waits[key], stage)
    first_extra = max(0.0, waits[0] - statistics.fmean(waits[1:])) if len(waits) > 1 else waits[0]
    return (sum(waits) - first_extra) / TRUTH.wall(stage)


# ---- several loaders in one stage ------------------------------------------------------------------


class FastAndSlowValidation(Planted):
    """Validation over two sets in turn: a fast one (``dataloader_idx`` 0, 16 rows) and a slow one
    (1: ``SlowRows``, 16 rows at 10 ms each, 40 ms a batch)."""

    def val_dataloader(self) -> list[Any]:  # type: ignore[override]
        return [
            truth_loader("val", Rows(16), batch_size=self.plan.batch),
            truth_loader("val/1", SlowRows(16), batch_size=self.plan.batch),
        ]

    def validation_step(self, batch: Any, batch_idx: int, dataloader_idx: int = 0) -> None:
        super().validation_step(batch, batch_idx)


def test_two_validation_loaders_each_get_their_own_wait_and_verdict(
    against_truth: Check, tmp_path: Path
) -> None:
    d = run(tmp_path, Plan(train_n=32, train_step_s=0.01), module=FastAndSlowValidation)
    val = [v for v in d.verdicts if v.stage == "val"]
    assert (val[0].kind, val[0].subject) == ("INPUT_BOUND", "val loader 1 (SlowRows)")
    assert "its loader 1 (SlowRows)" in val[0].message
    against_truth(val[0], loader_truth("val/1", "val"))
    assert [v.subject for v in d.verdicts if v.kind == "INPUT_BOUND"] == ["val loader 1 (SlowRows)"]
    # each loader's own account: its wait within 5 points of its truth clock, its steps by loader
    last = next(w.window for w in reversed(read_run(tmp_path / "run").windows) if w.window.stage == "val")
    loaders = last.account.loaders
    assert list(loaders) == ["val", "val/1"]
    assert (loaders["val"].dataset, loaders["val/1"].dataset) == ("Rows", "SlowRows")
    for name in loaders:
        truth = sum(TRUTH.inside(TRUTH.waits[name], "val")) / TRUTH.wall("val")
        assert loaders[name].fraction("data_wait") - truth < TOLERANCE  # iter() is in the account too
        assert loaders[name].fraction("data_wait") >= truth - 0.01
    assert sum(a.seconds("data_wait") for a in loaders.values()) == last.account.seconds("data_wait")
    assert sum(a.seconds("step") for a in loaders.values()) == pytest.approx(last.account.seconds("step"))
    assert only_causes(d, {"INPUT_BOUND", "EPOCH_BOUNDARY"}) == []


def test_a_script_iterating_two_loaders_in_one_window(against_truth: Check, tmp_path: Path) -> None:
    TRUTH.__init__()  # type: ignore[misc]
    reg = perfkit.Registry()
    windows = []
    with perfkit.use_registry(reg):
        for epoch in range(2):
            fast = truth_loader("train", Rows(32), batch_size=4)
            slow = truth_loader("train/1", SlowRows(16), batch_size=4)
            with perfkit.window("train", epoch=epoch, registry=reg) as w:
                TRUTH.starts["train"].append(time.perf_counter())
                for loader in (fast, slow):
                    for _ in w.iterate(loader):
                        plant("train", 0.005)
                TRUTH.ends["train"].append(time.perf_counter())
            assert w.window is not None
            windows.append(w.window)
    d = diagnose_windows(windows, cores=8)
    top = d.verdicts[0]
    assert (top.kind, top.subject) == ("INPUT_BOUND", "train loader 1 (SlowRows)")
    against_truth(top, loader_truth("train/1", "train"))
    assert [v.subject for v in d.verdicts if v.kind == "INPUT_BOUND"] == ["train loader 1 (SlowRows)"]
    assert (
        w.metrics["perf/train/loader/1/data_wait_fraction"]
        > 0.3
        > w.metrics["perf/train/loader/0/data_wait_fraction"]
    )
    assert w.metrics["perf/train/loader/0/batches"] == 8.0
    within_each_epoch(d)
    assert only_causes(d, {"INPUT_BOUND", "EPOCH_BOUNDARY"}) == []


# ---- an input-bound validation loader ---------------------------------------------------------------


def test_an_input_bound_validation_loader_is_the_cause_and_slower_than_training_its_context(
    against_truth: Check, tmp_path: Path
) -> None:
    d = run(tmp_path, Plan(val_getitem_s=0.01, val_n=32, train_n=32, train_step_s=0.01))
    top = d.verdicts[0]
    assert (top.kind, top.stage, top.subject) == ("INPUT_BOUND", "val", "val")
    assert "training's time per sample" in top.context
    assert "EVAL_SLOWER_THAN_TRAIN" not in [v.kind for v in (*d.verdicts, *d.context)]
    against_truth(top, loader_truth("val", "val"))
    assert not [v for v in d.verdicts if v.kind == "INPUT_BOUND" and v.stage == "train"]
    assert only_causes(d, {"INPUT_BOUND", "EPOCH_BOUNDARY"}) == []


# ---- a leak -------------------------------------------------------------------------------------------

LEAK_MB = 4
"""What ``Leaks`` keeps per step, at least: more where the test process is already large (the
whole suite runs in one process, and a fixed leak is a smaller part of a larger RSS)."""


class Leaks(Planted):
    """Keeps memory alive every training step (the outputs of every step, kept in a list): 4 MB a
    step, or enough that two epochs grow the process by half of what it was at the start."""

    def __init__(self, plan: Plan) -> None:
        super().__init__(plan)
        self.kept: list[torch.Tensor] = []
        steps = max(1, plan.train_n // plan.batch)
        self.leak_mb = max(LEAK_MB, psutil.Process().memory_info().rss / 2**20 * 0.5 / (2 * steps))

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        self.kept.append(torch.ones(int(self.leak_mb * 1024 * 1024) // 4))  # touched: resident
        return super().training_step(batch, batch_idx)


class RssPeaks(Callback):
    """The test's own RSS readings (psutil): after every training batch and at each epoch's end."""

    def __init__(self) -> None:
        self.peaks: list[float] = []
        self.process = psutil.Process()

    def on_train_epoch_start(self, *args: Any) -> None:
        self.peaks.append(0.0)

    def _read(self) -> None:
        self.peaks[-1] = max(self.peaks[-1], self.process.memory_info().rss / 2**20)

    def on_train_batch_end(self, *args: Any) -> None:
        self._read()

    def on_train_epoch_end(self, *args: Any) -> None:
        self._read()


def test_a_leak_is_memory_growth_measured_as_the_test_reads_rss(
    tmp_path: Path, record_property: Callable[[str, object], None]
) -> None:
    rss = RssPeaks()
    monitor = PerfMonitor(sample_resources=True, run_dir=str(tmp_path / "run"), top_k_slowest=0)
    fit(
        Plan(train_n=96, train_step_s=0.002),
        str(tmp_path),
        [rss, monitor],
        module=Leaks,
        max_epochs=3,
        limit_val_batches=0,
    )
    d: Diagnosis = diagnose(read_run(tmp_path / "run"), cores=8)
    top = d.verdicts[0]
    assert top.kind == "MEMORY_GROWTH"
    truth = rss.peaks[-1] / rss.peaks[0] - 1
    assert truth > 0.2  # the plant is big enough to be a leak
    record_property("verdict", f"{top.kind} ({top.stage}, {top.severity})")
    record_property("share", round(top.evidence["rss_peak_growth"], 3))  # its measure: the growth
    record_property("truth", round(truth, 3))
    assert top.evidence["rss_peak_growth"] == pytest.approx(truth, abs=TOLERANCE)
    step = [v for v in d.verdicts if v.part == "step"]
    regression = any("got slower" in v.context for v in step)
    assert all("memory peak grew" in v.context for v in step) if regression else True
    assert only_causes(d, set()) == []
