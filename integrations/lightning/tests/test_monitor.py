"""PerfMonitor on a real Trainer: per-epoch metrics of every stage, read back from CSVLogger's file."""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import lightning as L
import pytest
from lightning.pytorch.loggers import CSVLogger
from perfkit_lightning import PerfMonitor

import perfkit
from perfkit.names import RUN_DIR_NAME

from .tiny import BrokenLogger, EmptyVal, Tiny, said, trainer


@dataclass
class Fit:
    root: Path
    monitor: PerfMonitor
    trainer: L.Trainer
    rows: list[dict[str, str]]

    def perf_rows(self, key: str) -> list[dict[str, str]]:
        return [r for r in self.rows if r.get(key)]

    def values(self, key: str) -> list[float]:
        return [float(r[key]) for r in self.perf_rows(key)]


def read_rows(logger: CSVLogger) -> list[dict[str, str]]:
    with open(Path(logger.log_dir) / "metrics.csv", newline="") as fh:
        return list(csv.DictReader(fh))


@pytest.fixture(scope="module")
def fit(tmp_path_factory: pytest.TempPathFactory) -> Fit:
    """Two epochs of fit, then test and predict, with DataLoader workers for train/val/test."""
    root = tmp_path_factory.mktemp("fit")
    monitor = PerfMonitor(top_k_slowest=3)
    logger = CSVLogger(str(root), name="csv")
    t = trainer(str(root), [monitor], logger=logger)
    model = Tiny(workers=2, context="fork")
    with perfkit.use_registry(perfkit.Registry()):
        t.fit(model)
        t.test(model, verbose=False)
        t.predict(model)
    return Fit(root, monitor, t, read_rows(logger))


def test_every_stage_gets_its_metrics_once_per_epoch(fit: Fit) -> None:
    assert fit.values("perf/train/steps") == [8.0, 8.0]  # 32 samples in batches of 4
    assert fit.values("perf/val/steps") == [4.0, 4.0]
    assert fit.values("perf/test/steps") == [2.0]
    assert fit.values("perf/predict/steps") == [2.0]
    for stage in ("train", "val", "test", "predict"):
        for key in ("step_ms_mean", "step_ms_median", "step_ms_p95", "step_ms_p99", "step_ms_max"):
            assert all(v > 0 for v in fit.values(f"perf/{stage}/{key}")), key


def test_metrics_land_at_the_step_lightning_uses_for_the_epoch(fit: Fit) -> None:
    lightning_train = [r["step"] for r in fit.perf_rows("train_loss")]
    ours_train = [r["step"] for r in fit.perf_rows("perf/train/steps")]
    assert ours_train == lightning_train
    lightning_val = [r["step"] for r in fit.perf_rows("val_loss")]
    assert [r["step"] for r in fit.perf_rows("perf/val/steps")] == lightning_val


def test_data_wait_per_batch_and_its_share_of_the_epoch(fit: Fit) -> None:
    for stage in ("train", "val", "test"):
        assert all(v > 0 for v in fit.values(f"perf/{stage}/data_wait_ms_mean")), stage
        assert all(0 < v <= 1 for v in fit.values(f"perf/{stage}/data_wait_fraction")), stage


def test_throughput_and_the_validation_to_training_ratio(fit: Fit) -> None:
    samples = fit.values("perf/train/samples")
    assert samples == [32.0, 32.0]
    for per_s, epoch_s in zip(
        fit.values("perf/train/samples_per_s"), fit.values("perf/train/epoch_s"), strict=True
    ):
        assert per_s == pytest.approx(32 / epoch_s)
    assert all(v > 0 for v in fit.values("perf/val/time_per_sample_vs_train_ratio"))
    assert fit.values("perf/train/time_per_sample_vs_train_ratio") == []


def test_records_from_dataloader_workers_are_in_their_epoch(fit: Fit) -> None:
    assert fit.values("perf/train/series/getitem/count") == [32.0, 32.0]
    assert fit.values("perf/val/series/getitem/count") == [16.0, 16.0]
    assert fit.values("perf/train/workers") == [2.0, 2.0]
    assert all(v >= 1 for v in fit.values("perf/train/workers_needed"))


def test_the_training_window_leaves_validation_out(fit: Fit) -> None:
    # forward runs in training and validation steps: each stage counts only its own
    assert fit.values("perf/train/series/forward/count") == [8.0, 8.0]
    assert fit.values("perf/val/series/forward/count") == [4.0, 4.0]


def test_memory_peaks_come_from_the_sampler(fit: Fit) -> None:
    assert all(v > 10 for v in fit.values("perf/train/process_rss_peak_mb"))
    assert fit.values("perf/train/workers_rss_peak_mb")


def test_the_sanity_check_is_left_out(fit: Fit) -> None:
    assert not any(k.startswith("perf/sanity") for r in fit.rows for k, v in r.items() if v)


def test_the_run_directory_holds_every_window_and_the_slowest_steps(fit: Fit) -> None:
    run = fit.root / "csv" / "version_0" / RUN_DIR_NAME
    lines = [json.loads(x) for x in (run / "windows.jsonl").read_text().splitlines()]
    # trainer.test and trainer.predict after the fit are their first runs, not "epoch 2"
    assert [(x["stage"], x["epoch"]) for x in lines] == [
        ("val", 0),
        ("train", 0),
        ("val", 1),
        ("train", 1),
        ("test", 0),
        ("predict", 0),
    ]
    train = lines[1]
    assert len(train["slowest"]) == 3
    assert {"rows", "batch"} <= set(train["slowest"][0]["tags"])
    snapshot = perfkit.Snapshot.from_json((run / train["snapshot"]).read_text())
    assert snapshot["train.step"].count == 8
    assert perfkit.Snapshot.from_json((run / "final.json").read_text())["train.step"].count == 16


def test_console_summary_goes_through_logging(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    t = trainer(
        str(tmp_path), [PerfMonitor(console=True, sample_resources=False)], logger=False, max_epochs=1
    )
    with said() as log:
        t.fit(Tiny())
    out = log.text
    assert "[perfkit]" not in capsys.readouterr().out  # never print()
    assert "[perfkit] train epoch 0: 8 steps in" in out
    # validation runs inside the training epoch, but its block comes after training's
    assert out.index("[perfkit] train epoch 0") < out.index("[perfkit] val epoch 0")
    assert "[perfkit] val epoch 0: 4 steps in" in out
    assert "training's time per sample" in out


def test_the_sanity_check_when_asked_for(tmp_path: Path) -> None:
    monitor = PerfMonitor(include_sanity_check=True, sample_resources=False, save_run=False)
    trainer(str(tmp_path), [monitor], logger=False, max_epochs=1).fit(Tiny())
    assert monitor.last_metrics["sanity"]["perf/sanity/steps"] == 2.0


def test_mid_epoch_validation_stays_out_of_the_training_window(tmp_path: Path) -> None:
    monitor = PerfMonitor(sample_resources=False, save_run=False)
    logger = CSVLogger(str(tmp_path))
    trainer(str(tmp_path), [monitor], logger=logger, max_epochs=1, val_check_interval=0.5).fit(Tiny())
    rows = read_rows(logger)
    assert [float(r["perf/val/steps"]) for r in rows if r.get("perf/val/steps")] == [4.0, 4.0]
    assert [float(r["perf/train/steps"]) for r in rows if r.get("perf/train/steps")] == [8.0]


def test_disabled_it_leaves_the_trainer_and_logs_nothing(tmp_path: Path) -> None:
    monitor = PerfMonitor(enabled=False)
    logger = CSVLogger(str(tmp_path))
    t = trainer(str(tmp_path), [monitor], logger=logger, max_epochs=1)
    t.fit(Tiny())
    assert monitor not in t.callbacks  # type: ignore[attr-defined]
    assert not any(k.startswith("perf/") for r in read_rows(logger) for k, v in r.items() if v)


def test_a_logger_that_raises_is_warned_about_once_and_training_goes_on(tmp_path: Path) -> None:
    logger = CSVLogger(str(tmp_path))
    broken = BrokenLogger()
    t = trainer(str(tmp_path), [PerfMonitor(sample_resources=False)], logger=[broken, logger])
    with pytest.warns(perfkit.PerfkitWarning, match="BrokenLogger.log_metrics failed") as seen:
        t.fit(Tiny())
    assert len([w for w in seen if "BrokenLogger" in str(w.message)]) == 1
    assert broken.calls == 4  # two epochs of train and val: every one was tried
    assert [float(r["perf/train/steps"]) for r in read_rows(logger) if r.get("perf/train/steps")] == [
        8.0,
        8.0,
    ]


def test_a_batch_size_fn_that_raises_turns_samples_off_with_one_warning(tmp_path: Path) -> None:
    def broken(batch: Any) -> int:
        raise KeyError("images")

    monitor = PerfMonitor(batch_size_fn=broken, sample_resources=False, save_run=False)
    with pytest.warns(perfkit.PerfkitWarning, match="batch_size_fn raised KeyError") as seen:
        trainer(str(tmp_path), [monitor], logger=False, max_epochs=1).fit(Tiny())
    assert len([w for w in seen if w.category is perfkit.PerfkitWarning]) == 1
    assert "perf/train/samples_per_s" not in monitor.last_metrics["train"]
    assert monitor.last_metrics["train"]["perf/train/steps"] == 8.0


def test_batch_size_fn_overrides_the_batch_size(tmp_path: Path) -> None:
    monitor = PerfMonitor(batch_size_fn=lambda batch: 10, sample_resources=False, save_run=False)
    trainer(str(tmp_path), [monitor], logger=False, max_epochs=1).fit(Tiny())
    assert monitor.last_metrics["train"]["perf/train/samples"] == 80.0


def test_an_empty_validation_set_is_not_an_error(tmp_path: Path) -> None:
    monitor = PerfMonitor(sample_resources=False, save_run=False)
    trainer(str(tmp_path), [monitor], logger=False, max_epochs=1, num_sanity_val_steps=0).fit(EmptyVal())
    assert monitor.last_metrics["train"]["perf/train/steps"] == 8.0


def test_non_numeric_tags_are_warned_about_once(tmp_path: Path) -> None:
    from perfkit_lightning import tag_step

    with pytest.warns(perfkit.PerfkitWarning, match="tag_step\\(kind='receipt'\\) is not a number"):
        tag_step(kind="receipt")
        tag_step(kind="receipt")


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"stages": ["train", "eval"]}, ValueError, "stages: unknown stage 'eval'"),
        ({"stages": "train"}, TypeError, "stages must be a list"),
        ({"top_k_slowest": -1}, ValueError, "top_k_slowest must be an int >= 0, got -1"),
        ({"batch_size_fn": 3}, TypeError, "batch_size_fn must be callable or None, got 3"),
        (
            {"sample_interval_s": 0},
            ValueError,
            "sample_interval_s must be a finite number in (0, 3600], got 0",
        ),
        (
            {"sample_interval_s": 1e4},
            ValueError,
            "sample_interval_s must be a finite number in (0, 3600], got 10000.0",
        ),
        (
            {"sample_interval_s": float("inf")},
            ValueError,
            "sample_interval_s must be a finite number in (0, 3600], got inf",
        ),
        ({"merge_timeout_s": 0}, ValueError, "merge_timeout_s must be a finite number > 0.0, got 0"),
        ({"run_dir": 5}, TypeError, "run_dir must be a path or None, got 5"),
        ({"prefix": ""}, ValueError, "prefix must be a non-empty str"),
        ({"registry": "default"}, TypeError, "registry must be a perfkit.Registry"),
    ],
)
def test_bad_arguments_fail_at_construction(
    kwargs: dict[str, Any], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message.replace("(", "\\(").replace(")", "\\)")):
        PerfMonitor(**kwargs)


@pytest.mark.parametrize(
    ("bar", "shown"),
    [("TQDMProgressBar", "Epoch 1: 100%"), ("RichProgressBar", "Epoch 1/1")],
    ids=["tqdm", "rich"],  # Lightning's default is Rich where rich is installed (transformers brings it)
)
def test_with_the_progress_bar_on_no_line_is_spliced_into_the_bar(
    tmp_path: Path, bar: str, shown: str
) -> None:
    """stdout and stderr as one terminal sees them: every perfkit line starts its own line."""
    import re
    import subprocess
    import sys

    script = f"""
import sys
sys.path.insert(0, {str(Path(__file__).parent)!r})
from lightning.pytorch.callbacks import {bar}
from perfkit_lightning import PerfMonitor
from tiny import Tiny, trainer
monitor = PerfMonitor(console=True, sample_resources=False, save_run=False)
callbacks = [monitor, {bar}()]
trainer({str(tmp_path)!r}, callbacks, logger=False, max_epochs=2, enable_progress_bar=True).fit(Tiny())
"""
    done = subprocess.run(
        [sys.executable, "-c", script],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-3000:]
    pieces = re.split(r"[\r\n]", done.stdout)
    ours = [p for p in pieces if "[perfkit]" in p]
    assert len(ours) == 4  # train and val, two epochs
    assert [p for p in ours if not p.startswith("[perfkit]")] == []
    assert shown in done.stdout  # the bar was there


def test_validate_and_test_after_a_fit_keep_their_windows_their_numbers_and_the_reference(
    tmp_path: Path,
) -> None:
    """Each call on one Trainer has a driver of its own; what must outlive it does: the run
    directory keeps every window (none replaces another's snapshot), stand-alone runs are counted
    across calls, and training's time per sample stays the other stages' reference."""
    from perfkit.run import read_run

    monitor = PerfMonitor(run_dir=str(tmp_path / "run"), sample_resources=False)
    t = trainer(str(tmp_path), [monitor], logger=False, max_epochs=1)
    model = Tiny()
    with perfkit.use_registry(perfkit.Registry()):
        t.fit(model)
        t.validate(model, verbose=False)
        t.test(model, verbose=False)
        t.test(model, verbose=False)
    run = read_run(tmp_path / "run")
    assert [(w.stage, w.epoch) for w in run.windows] == [
        ("val", 0),
        ("train", 0),
        ("val", 0),  # the first stand-alone validation
        ("test", 0),
        ("test", 1),
    ]
    assert len({w.snapshot_file for w in run.windows}) == 5
    for w in run.windows:
        assert w.snapshot[f"{w.stage}.step"].count == w.metric("steps")
        if w.stage != "train":
            assert w.metric("time_per_sample_vs_train_ratio") is not None
