"""Several perfkit callbacks on one Trainer share one stage timeline: each step is recorded once."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from lightning.pytorch.callbacks import Callback
from lightning.pytorch.loggers import CSVLogger
from perfkit_lightning import PerfMonitor, PerformanceProfilerCallback, ThroughputMonitorCallback

import perfkit
from perfkit.names import RUN_DIR_NAME

from .tiny import Tiny, trainer


def rows(logger: CSVLogger) -> list[dict[str, str]]:
    with open(Path(logger.log_dir) / "metrics.csv", newline="") as fh:
        return [{k: v for k, v in r.items() if v} for r in csv.DictReader(fh)]


def values(table: list[dict[str, str]], key: str) -> list[float]:
    return [float(r[key]) for r in table if key in r]


@pytest.mark.parametrize("order", ["monitor first", "presets first"])
def test_the_monitor_and_both_presets_count_each_step_once(tmp_path: Path, order: str) -> None:
    logger = CSVLogger(str(tmp_path))
    monitor = PerfMonitor(sample_resources=False)
    presets = [PerformanceProfilerCallback(), ThroughputMonitorCallback()]
    callbacks = [monitor, *presets] if order == "monitor first" else [*presets, monitor]
    with perfkit.use_registry(perfkit.Registry()):
        trainer(str(tmp_path), callbacks, logger=logger, num_sanity_val_steps=0).fit(Tiny())
    table = rows(logger)
    assert values(table, "perf/val/steps") == [4.0, 4.0]
    assert values(table, "perf/train/steps") == [8.0, 8.0]
    assert values(table, "performance/val_num_batches") == [4.0, 4.0]
    epoch_s = values(table, "perf/train/epoch_s")
    assert values(table, "batches_per_second") == pytest.approx([8 / s for s in epoch_s])
    assert values(table, "perf/train/batches_per_s") == pytest.approx([8 / s for s in epoch_s])
    assert values(table, "samples_per_second") == pytest.approx([32 / s for s in epoch_s])
    run = Path(logger.log_dir) / RUN_DIR_NAME
    lines = [json.loads(x) for x in (run / "windows.jsonl").read_text().splitlines()]
    assert [(x["stage"], x["epoch"]) for x in lines] == [("val", 0), ("train", 0), ("val", 1), ("train", 1)]
    for line in lines:
        snapshot = perfkit.Snapshot.from_json((run / line["snapshot"]).read_text())
        assert snapshot[f"{line['stage']}.step"].count == {"train": 8, "val": 4}[line["stage"]]


class Sleeps(Callback):
    """A third-party callback that spends 20 ms after every training batch."""

    def on_train_batch_end(self, *args: object, **kwargs: object) -> None:
        import time

        time.sleep(0.02)


@pytest.mark.parametrize("before", [True, False])
def test_another_callbacks_time_is_its_own_wherever_it_is_listed(tmp_path: Path, before: bool) -> None:
    monitor = PerfMonitor(sample_resources=False, save_run=False)
    callbacks = [Sleeps(), monitor] if before else [monitor, Sleeps()]
    trainer(str(tmp_path), callbacks, logger=False, max_epochs=1, num_sanity_val_steps=0).fit(Tiny())
    m = monitor.last_metrics["train"]
    assert m["perf/train/time/callback/Sleeps_s"] == pytest.approx(8 * 0.02, rel=0.25)
    assert m["perf/train/step_ms_median"] < 10  # the sleep is not in the step
    parts = [m[f"perf/train/time/{p}_s"] for p in ("data_wait", "step", "callbacks", "loader_setup", "other")]
    assert sum(parts) == pytest.approx(m["perf/train/epoch_s"])


def test_disabled_by_the_environment_a_fit_logs_writes_and_says_nothing(tmp_path: Path) -> None:
    script = f"""
import sys
sys.path.insert(0, {str(Path(__file__).parent)!r})
from lightning.pytorch.loggers import CSVLogger
from perfkit_lightning import PerfMonitor, PerformanceProfilerCallback, ProfilerCallback
from tiny import Tiny, trainer
logger = CSVLogger({str(tmp_path)!r})
callbacks = [PerfMonitor(console=True), PerformanceProfilerCallback(verbose=True), ProfilerCallback()]
t = trainer({str(tmp_path)!r}, callbacks, logger=logger, max_epochs=1)
t.fit(Tiny())
print("callbacks left:", sum(type(c).__module__.startswith("perfkit") for c in t.callbacks))
print("log dir:", logger.log_dir)
"""
    env = {**os.environ, "PERFKIT_DISABLED": "1"}
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "callbacks left: 0" in done.stdout
    log_dir = Path(done.stdout.split("log dir:")[1].strip())
    header = (log_dir / "metrics.csv").read_text().splitlines()[0]
    assert "perf/" not in header
    assert "performance/" not in header
    assert not (log_dir / RUN_DIR_NAME).exists()
    output = done.stdout + done.stderr
    assert not any(tag in output for tag in ("[perfkit]", "[Performance]", "[Profiler]"))
    assert output.count("perfkit is disabled") == 1  # one line says so
