"""phase_metrics: one phase epoch's window as flat metrics whose keys carry their unit."""

from __future__ import annotations

import math

import pytest

import perfkit
from perfkit import PhaseWindow, Registry

from .conftest import FakeClock

MS = 1_000_000


def record(reg: Registry, clock: FakeClock, name: str, ms: list[float]) -> None:
    for d in ms:
        t0 = clock()
        clock.advance(int(d * MS))
        reg.record(name, t0, clock())


def test_step_data_and_throughput_metrics(reg: Registry, clock: FakeClock) -> None:
    record(reg, clock, "val.step", [10, 20, 30, 40])
    record(reg, clock, "val.data.wait", [5, 5, 5, 5])
    m = perfkit.phase_metrics(PhaseWindow("val", 2, reg.snapshot(), wall_s=0.2, samples=16))
    assert m["perf/val/steps"] == 4
    assert m["perf/val/step_ms_mean"] == pytest.approx(25.0)
    assert m["perf/val/step_ms_max"] == pytest.approx(40.0)
    assert m["perf/val/data_wait_fraction"] == pytest.approx(0.1)
    assert (m["perf/val/samples_per_s"], m["perf/val/batches_per_s"]) == (
        pytest.approx(80.0),
        pytest.approx(20.0),
    )


def test_ratio_to_training_time_per_sample(reg: Registry, clock: FakeClock) -> None:
    record(reg, clock, "val.step", [10])
    window = PhaseWindow("val", 0, reg.snapshot(), wall_s=1.0, samples=10)
    assert (
        perfkit.phase_metrics(window, reference_s_per_sample=0.05)["perf/val/time_per_sample_vs_train_ratio"]
        == 2.0
    )


def test_workers_needed_from_worker_time_per_batch(reg: Registry, clock: FakeClock) -> None:
    record(reg, clock, "train.step", [10, 10])
    record(reg, clock, "train.data.fetch", [35, 35])  # made in this process: worker None, so 0 workers
    m = perfkit.phase_metrics(PhaseWindow("train", 0, reg.snapshot(), wall_s=0.1))
    assert (m["perf/train/workers_needed"], m["perf/train/workers"]) == (4.0, 0.0)


def test_user_series_are_reported_and_the_phases_own_are_not(reg: Registry, clock: FakeClock) -> None:
    record(reg, clock, "train.step", [10])
    record(reg, clock, "pyclipper.unclip", [1, 3])
    m = perfkit.phase_metrics(PhaseWindow("train", 0, reg.snapshot(), wall_s=0.1))
    assert m["perf/train/series/pyclipper.unclip/count"] == 2
    assert m["perf/train/series/pyclipper.unclip/total_ms"] == pytest.approx(4.0)
    assert not any("/series/train.step" in k for k in m)


def test_keys_lose_what_loggers_would_drop() -> None:
    assert (
        perfkit.metric_key("perf", "train", "series", "model.<locals>.fwd")
        == "perf/train/series/model._locals_.fwd"
    )


def test_ranks_name_the_slowest_and_skip_a_rank_without_steps(reg: Registry, clock: FakeClock) -> None:
    record(reg, clock, "val.step", [10])
    window = PhaseWindow("val", 0, reg.snapshot(), wall_s=0.1, rank_step_means_s=(0.010, math.nan, 0.030))
    m = perfkit.phase_metrics(window)
    assert (m["perf/val/ranks"], m["perf/val/slowest_rank"]) == (3.0, 2.0)
    assert m["perf/val/step_ms_mean_rank_spread"] == pytest.approx(20.0)


def test_memory_peaks_come_from_gauges(reg: Registry) -> None:
    reg.gauge("process.rss_mb", 500.0)
    reg.gauge("process.rss_mb", 700.0)
    reg.gauge("cuda0.peak_allocated_mb", 1200.0)
    m = perfkit.phase_metrics(PhaseWindow("train", 0, reg.snapshot(), wall_s=1.0))
    assert (m["perf/train/process_rss_peak_mb"], m["perf/train/cuda0_allocator_peak_mb"]) == (700.0, 1200.0)
