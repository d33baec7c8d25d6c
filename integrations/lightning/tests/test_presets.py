"""Our users' earlier callbacks, as presets of PerfMonitor: same arguments, same keys."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import pytest
from lightning.pytorch.loggers import CSVLogger
from perfkit_lightning import PerformanceProfilerCallback, ThroughputMonitorCallback

import perfkit

from .tiny import EmptyVal, Tiny, said, trainer


def logged(logger: CSVLogger) -> list[dict[str, str]]:
    with open(Path(logger.log_dir) / "metrics.csv", newline="") as fh:
        return [{k: v for k, v in r.items() if v} for r in csv.DictReader(fh)]


def keys(rows: list[dict[str, str]]) -> set[str]:
    return {k for r in rows for k in r} - {"epoch", "step", "train_loss", "val_loss"}


def test_performance_profiler_logs_its_validation_keys(tmp_path: Path) -> None:
    logger = CSVLogger(str(tmp_path))
    callback = PerformanceProfilerCallback(log_interval=2, verbose=True)
    with perfkit.use_registry(perfkit.Registry()), said() as log:
        trainer(str(tmp_path), [callback], logger=logger).fit(Tiny())
    rows = logged(logger)
    epoch_keys = {
        "performance/val_epoch_time",
        "performance/val_batch_mean",
        "performance/val_batch_median",
        "performance/val_batch_p95",
        "performance/val_batch_p99",
        "performance/val_batch_std",
        "performance/val_num_batches",
        "performance/cpu_memory_percent",
    }
    assert keys(rows) == epoch_keys | {"performance/val_batch_time", "performance/val_batch_idx"}
    # every log_interval=2 validation batches: batches 0 and 2 of each of the two epochs
    assert [float(r["performance/val_batch_idx"]) for r in rows if "performance/val_batch_idx" in r] == [
        0,
        2,
        0,
        2,
    ]
    assert [float(r["performance/val_num_batches"]) for r in rows if "performance/val_num_batches" in r] == [
        4,
        4,
    ]
    # each per-batch row at its own step: the validation batches logged so far
    assert [int(r["step"]) for r in rows if "performance/val_batch_idx" in r] == [0, 1, 2, 3]
    assert "[Performance] Validation epoch 0: 4 batches in" in log.text


def test_performance_profiler_without_memory_has_no_memory_keys(tmp_path: Path) -> None:
    logger = CSVLogger(str(tmp_path))
    trainer(str(tmp_path), [PerformanceProfilerCallback(profile_memory=False)], logger=logger).fit(Tiny())
    assert not any("memory" in k for k in keys(logged(logger)))


def test_performance_profiler_with_an_empty_validation_set(tmp_path: Path) -> None:
    logger = CSVLogger(str(tmp_path))
    t = trainer(str(tmp_path), [PerformanceProfilerCallback()], logger=logger, num_sanity_val_steps=0)
    t.fit(EmptyVal())  # no error, and nothing to report per batch
    assert not any(k.startswith("performance/val_batch_") for k in keys(logged(logger)))


def test_throughput_monitor_logs_each_training_epoch(tmp_path: Path) -> None:
    logger = CSVLogger(str(tmp_path))
    dataset_bytes = 3 * 1024 * 1024
    callback = ThroughputMonitorCallback(memory_probes={"dataset": lambda: dataset_bytes, "cache": lambda: 0})
    with perfkit.use_registry(perfkit.Registry()), said() as log:
        trainer(str(tmp_path), [callback], logger=logger).fit(Tiny(workers=1, context="fork"))
    rows = [r for r in logged(logger) if "samples_per_second" in r]
    assert len(rows) == 2
    expected = {"samples_per_second", "batches_per_second", "throughput_efficiency", "memory_peak_mb"}
    expected |= {
        f"batch_{what}_time_ms_{q}" for what in ("load", "transform") for q in ("avg", "p50", "p95", "p99")
    }
    expected |= {"memory_dataset_mb", "memory_cache_mb"}
    assert expected <= set(rows[0])
    assert float(rows[0]["memory_dataset_mb"]) == 3.0
    assert 0 < float(rows[0]["throughput_efficiency"]) <= 1
    assert "[Throughput] Epoch 0:" in log.text


def test_throughput_monitor_every_other_epoch(tmp_path: Path) -> None:
    logger = CSVLogger(str(tmp_path))
    trainer(
        str(tmp_path), [ThroughputMonitorCallback(log_interval=2, track_memory=False)], logger=logger
    ).fit(Tiny())
    rows = [r for r in logged(logger) if "samples_per_second" in r]
    assert [r["step"] for r in rows] == ["7"]  # epoch 0 only (its last batch is step 7); epoch 1 skipped
    assert not any(k.startswith("memory") for r in rows for k in r)


def test_a_memory_probe_that_raises_is_left_out_with_a_warning(tmp_path: Path) -> None:
    def broken() -> int:
        raise OSError("cache index unreadable")

    callback = ThroughputMonitorCallback(memory_probes={"cache": broken})
    with pytest.warns(perfkit.PerfkitWarning, match="memory probe 'cache' raised OSError"):
        trainer(str(tmp_path), [callback], logger=False, max_epochs=1).fit(Tiny())


def test_disabled_presets_do_nothing(tmp_path: Path) -> None:
    logger = CSVLogger(str(tmp_path))
    callbacks = [PerformanceProfilerCallback(enabled=False), ThroughputMonitorCallback(enabled=False)]
    trainer(str(tmp_path), callbacks, logger=logger).fit(Tiny())
    assert keys(logged(logger)) == set()


@pytest.mark.parametrize(
    ("cls", "kwargs", "message"),
    [
        (PerformanceProfilerCallback, {"log_interval": 0}, "log_interval must be an int >= 1, got 0"),
        (ThroughputMonitorCallback, {"log_interval": 1.5}, "log_interval must be an int >= 1, got 1.5"),
        (
            ThroughputMonitorCallback,
            {"memory_probes": {"dataset": 12}},
            "memory_probes\\['dataset'\\] must be a callable",
        ),
        (ThroughputMonitorCallback, {"memory_probes": 5}, "memory_probes must be a mapping .* got 5"),
    ],
)
def test_bad_arguments_fail_at_construction(cls: Any, kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises((ValueError, TypeError), match=message):
        cls(**kwargs)
