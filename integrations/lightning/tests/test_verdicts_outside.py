"""Planted causes outside the step and the cause inside the wait: a slow logger, a slow checkpoint
callback, the model's own slow hook, time nobody timed between steps, a slow transform made in the
loop's process (num_workers=0), on Lightning fits and in plain scripts, and a fast control.

The truth is the test's own clocks (``planted``). In each: the first verdict names the planted
cause, its share is within 5 points of the truth, the shares of one stage epoch's verdicts add up
to at most the epoch, and no verdict claims a cause that is not there."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.loggers import CSVLogger
from lightning.pytorch.plugins.precision import Precision

import perfkit
from perfkit.findings import Diagnosis, diagnose_windows

from .planted import TRUTH, Plan, Planted, Rows, clock_in, plant, truth_loader
from .test_verdicts import CAUSES, Check, only_causes, run, truth_check, wait_truth

TOLERANCE = 0.05


@pytest.fixture
def against_truth(record_property: Callable[[str, object], None]) -> Check:
    """As ``test_verdicts.against_truth``, within 5 points."""

    return truth_check(record_property, TOLERANCE)


def within_each_epoch(d: Diagnosis) -> None:
    """The verdicts of one stage epoch claim at most all of it."""
    by_epoch: dict[tuple[str, int], float] = {}
    for v in d.verdicts:
        if v.kind in CAUSES:
            by_epoch[(v.stage, v.epoch)] = by_epoch.get((v.stage, v.epoch), 0.0) + v.share
    assert all(total <= 1.0 + 1e-9 for total in by_epoch.values()), by_epoch


# ---- planted causes -------------------------------------------------------------------------------


class TrackerLogger(CSVLogger):
    """A logger whose ``log_metrics`` makes a synchronous call to a tracker (25 ms) for the model's
    own metrics (perfkit's metrics, logged through it too, are left alone: they are not planted)."""

    def log_metrics(self, metrics: dict[str, float], step: int | None = None) -> None:
        if "loss" in metrics:
            plant("logger", 0.025)
        super().log_metrics(metrics, step)


class Logs(Planted):
    """Logs its loss every step, as most models do."""

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        loss = super().training_step(batch, batch_idx)
        self.log("loss", loss)
        return loss


class SlowCheckpoint(ModelCheckpoint):
    """Every save costs 60 ms more (a slow disk), timed whole by the test."""

    def _save_checkpoint(self, trainer: Any, filepath: str) -> None:
        t0 = time.perf_counter()
        time.sleep(0.06)
        super()._save_checkpoint(trainer, filepath)
        clock_in("planted", "checkpoint", t0)


class SlowBatchEnd(Planted):
    """The model's own ``on_train_batch_end`` does 20 ms of work (a metric computed every batch)."""

    def on_train_batch_end(self, *args: Any) -> None:
        plant("hook", 0.02)


class SlowInput(Precision):
    """20 ms nobody times between steps: a precision plugin converting each batch."""

    def convert_input(self, data: Any) -> Any:
        plant("gap", 0.02)
        return super().convert_input(data)


class TransformRows(Rows):
    """Rows made by a slow transform (4 ms an item) timed as a section."""

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        with perfkit.section("slow_transform"):
            plant("slow_transform", 0.004)
            return super().__getitem__(i)


class SlowTransform(Planted):
    def train_dataloader(self) -> Any:
        return truth_loader("train", TransformRows(self.plan.train_n), batch_size=self.plan.batch)


# ---- Lightning fits -------------------------------------------------------------------------------


def test_a_slow_logger_is_named(against_truth: Check, tmp_path: Path) -> None:
    logger = TrackerLogger(str(tmp_path / "logs"))
    d = run(
        tmp_path,
        Plan(train_step_s=0.005),
        module=Logs,
        limit_val_batches=0,
        logger=logger,
        log_every_n_steps=1,
    )
    top = d.verdicts[0]
    assert (top.kind, top.subject) == ("SLOW_LOGGER", "TrackerLogger.log_metrics")
    against_truth(top, TRUTH.share("planted", "train", what="logger"))
    within_each_epoch(d)
    assert only_causes(d, {"SLOW_LOGGER"}) == []


def test_a_slow_checkpoint_callback_is_named_as_checkpointing(against_truth: Check, tmp_path: Path) -> None:
    saving = SlowCheckpoint(dirpath=str(tmp_path / "ckpt"), every_n_train_steps=3, save_top_k=-1)
    d = run(
        tmp_path, Plan(train_step_s=0.005), limit_val_batches=0, enable_checkpointing=True, after=[saving]
    )
    top = d.verdicts[0]
    assert (top.kind, top.subject) == ("CHECKPOINT", "SlowCheckpoint")
    assert "every_n_epochs" in top.action
    against_truth(top, TRUTH.share("planted", "train", what="checkpoint"))
    within_each_epoch(d)
    assert only_causes(d, {"CHECKPOINT"}) == []  # not CALLBACK_OVERHEAD as well


def test_the_models_own_slow_hook_is_named(against_truth: Check, tmp_path: Path) -> None:
    d = run(tmp_path, Plan(train_step_s=0.005), module=SlowBatchEnd, limit_val_batches=0)
    top = d.verdicts[0]
    assert (top.kind, top.subject) == ("MODULE_HOOK", "on_train_batch_end")
    against_truth(top, TRUTH.share("planted", "train", what="hook"))
    within_each_epoch(d)
    assert only_causes(d, {"MODULE_HOOK"}) == []


def test_time_nobody_timed_between_steps_is_a_residual(against_truth: Check, tmp_path: Path) -> None:
    d = run(tmp_path, Plan(train_step_s=0.005), limit_val_batches=0, plugins=[SlowInput()])
    top = d.verdicts[0]
    assert (top.kind, top.subject) == ("RESIDUAL", "between_steps")
    assert f"ProfilerCallback(profile_epochs=[{top.epoch}], stages=['train'])" in top.action
    against_truth(top, TRUTH.share("planted", "train", what="gap"))
    within_each_epoch(d)
    assert only_causes(d, {"RESIDUAL"}) == []


def test_a_slow_transform_without_workers_is_named_inside_the_wait(
    against_truth: Check, tmp_path: Path
) -> None:
    d = run(tmp_path, Plan(train_step_s=0.005), module=SlowTransform, limit_val_batches=0)
    top = d.verdicts[0]
    assert (top.kind, top.subject) == ("INPUT_BOUND", "train")
    assert "was slow_transform, run in this process" in top.message
    against_truth(top, wait_truth("train")[0])
    made = sum(TRUTH.inside(TRUTH.planted["slow_transform"], "train"))
    assert top.evidence["wait_section_s"] == pytest.approx(made, rel=0.05)
    within_each_epoch(d)
    assert only_causes(d, {"INPUT_BOUND", "EPOCH_BOUNDARY"}) == []


def test_a_fast_control_has_nothing_outside_the_step_to_name(tmp_path: Path) -> None:
    logger = CSVLogger(str(tmp_path / "logs"))
    d = run(tmp_path, Plan(compute=256, train_n=32), module=Logs, logger=logger, log_every_n_steps=1)
    assert only_causes(d, set()) == []
    within_each_epoch(d)


# ---- plain scripts ----------------------------------------------------------------------------------


def script(tmp_path: Path, dataset: Any, *, step_s: float, after_loop_s: float = 0.0) -> Diagnosis:
    """Two training epochs of a plain loop in ``perfkit.window``, stamped by the test's clocks."""
    TRUTH.__init__()  # type: ignore[misc]
    reg = perfkit.Registry()
    windows = []
    with perfkit.use_registry(reg):
        for epoch in range(2):
            loader = truth_loader("train", dataset, batch_size=4)
            with perfkit.window("train", epoch=epoch, registry=reg) as w:
                TRUTH.starts["train"].append(time.perf_counter())
                for _ in w.iterate(loader):
                    plant("train", step_s)
                if after_loop_s:
                    plant("after", after_loop_s)  # an evaluation at the end of the window, not timed
                TRUTH.ends["train"].append(time.perf_counter())
            assert w.window is not None
            windows.append(w.window)
    return diagnose_windows(windows, cores=8)


def test_a_script_names_the_slow_transform_inside_the_wait(against_truth: Check, tmp_path: Path) -> None:
    d = script(tmp_path, TransformRows(48), step_s=0.005)
    top = d.verdicts[0]
    assert (top.kind, top.subject) == ("INPUT_BOUND", "train")
    assert "was slow_transform, run in this process" in top.message
    against_truth(top, wait_truth("train")[0])
    within_each_epoch(d)
    assert only_causes(d, {"INPUT_BOUND", "EPOCH_BOUNDARY"}) == []


def test_a_script_names_the_time_outside_its_loop(against_truth: Check, tmp_path: Path) -> None:
    d = script(tmp_path, Rows(48), step_s=0.005, after_loop_s=0.08)
    top = d.verdicts[0]
    assert (top.kind, top.subject) == ("RESIDUAL", "after_last_step")
    assert "perfkit.torch.ProfilerWindows(epochs=[1], stages=['train']" in top.action
    against_truth(top, TRUTH.share("planted", "train", what="after"))
    within_each_epoch(d)
    assert only_causes(d, {"RESIDUAL"}) == []
