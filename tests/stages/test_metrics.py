"""stage_metrics: one stage epoch's window as flat metrics whose keys carry their unit."""

from __future__ import annotations

import pytest

from perfkit import Registry
from perfkit.stages import Account, RankPart, metric_key, stage_metrics
from tests.conftest import FakeClock
from tests.stages.windows import stage_window

MS = 1_000_000


def record(reg: Registry, clock: FakeClock, name: str, ms: list[float]) -> None:
    for d in ms:
        t0 = clock()
        clock.advance(int(d * MS))
        reg.record(name, t0, clock())


def test_step_data_and_throughput_metrics(reg: Registry, clock: FakeClock) -> None:
    record(reg, clock, "val.step", [10, 20, 30, 40])
    record(reg, clock, "val.data.wait", [5, 5, 5, 5])
    m = stage_metrics(stage_window("val", 2, reg.snapshot(), wall_s=0.2, samples=16))
    assert m["perf/val/steps"] == 4
    assert m["perf/val/epoch"] == 2
    assert m["perf/val/step_ms_mean"] == pytest.approx(25.0)
    assert m["perf/val/step_ms_max"] == pytest.approx(40.0)
    assert m["perf/val/data_wait_fraction"] == pytest.approx(0.1)
    assert (m["perf/val/samples_per_s"], m["perf/val/batches_per_s"]) == (
        pytest.approx(80.0),
        pytest.approx(20.0),
    )


def test_the_account_adds_up_to_the_wall_time(reg: Registry, clock: FakeClock) -> None:
    record(reg, clock, "val.step", [10, 20, 30, 40])
    record(reg, clock, "val.data.wait", [5, 5, 5, 5])
    record(reg, clock, "val.hook.ProgressBar", [2, 2, 2, 2])
    m = stage_metrics(stage_window("val", 0, reg.snapshot(), wall_s=0.2))
    parts = {k: v for k, v in m.items() if k.startswith("perf/val/time/") and k.count("/") == 3}
    assert m["perf/val/time/step_s"] == pytest.approx(0.1)
    assert m["perf/val/time/data_wait_s"] == pytest.approx(0.02)
    assert m["perf/val/time/callbacks_s"] == pytest.approx(0.008)
    assert m["perf/val/time/callback/ProgressBar_s"] == pytest.approx(0.008)
    assert m["perf/val/time/other_s"] == pytest.approx(0.072)
    assert sum(v for k, v in parts.items() if k.endswith("_s")) == pytest.approx(0.2)
    assert sum(v for k, v in parts.items() if k.endswith("_fraction")) == pytest.approx(1.0)


def test_each_start_of_the_loader_has_its_first_batch_judged_against_its_own(
    reg: Registry, clock: FakeClock
) -> None:
    """Two loaders in turn (each with its iter()): a slow one whose first batch is like its
    second, then a fast one whose first batch is 3 ms slower than its others."""
    record(reg, clock, "val.data.iter", [1])
    record(reg, clock, "val.data.wait", [40, 40])
    record(reg, clock, "val.data.iter", [1])
    record(reg, clock, "val.data.wait", [4, 1, 1, 1])
    a = stage_window("val", 0, reg.snapshot(), wall_s=0.1).account
    assert a.subjects["data_wait"]["first_batch"] == pytest.approx(0.044)
    assert a.first_batch_extra_s == pytest.approx(0.003)
    assert Account.from_dict(a.to_dict()) == a


def test_ratio_to_training_time_per_sample(reg: Registry, clock: FakeClock) -> None:
    record(reg, clock, "val.step", [10])
    window = stage_window("val", 0, reg.snapshot(), wall_s=1.0, samples=10, reference_s_per_sample=0.05)
    assert stage_metrics(window)["perf/val/time_per_sample_vs_train_ratio"] == 2.0


def test_workers_needed_from_worker_time_per_batch(reg: Registry, clock: FakeClock) -> None:
    record(reg, clock, "train.step", [10, 10])
    record(reg, clock, "train.data.fetch", [35, 35])  # made in this process: worker None, so 0 workers
    # The loop asks for a batch every 10 ms (no wait, nothing but the steps): 35 / 10 -> 4 workers.
    m = stage_metrics(stage_window("train", 0, reg.snapshot(), wall_s=0.02), cores=8)
    assert (m["perf/train/workers_needed"], m["perf/train/workers"]) == (4.0, 0.0)


def test_workers_needed_counts_everything_the_loop_does_between_batches(
    reg: Registry, clock: FakeClock
) -> None:
    record(reg, clock, "train.step", [10, 10])
    record(reg, clock, "train.data.fetch", [35, 35])
    # 100 ms for 2 batches without waiting: the loop asks every 50 ms, one worker keeps up.
    m = stage_metrics(stage_window("train", 0, reg.snapshot(), wall_s=0.1), cores=8)
    assert m["perf/train/workers_needed"] == 1.0


def test_workers_needed_beyond_the_cores_is_said_beside_them(reg: Registry, clock: FakeClock) -> None:
    """4 workers needed, 2 cores free for them: both numbers, measurements for dashboards (what
    more workers would do within the cores and memory is the INPUT_BOUND verdict's to say)."""
    record(reg, clock, "train.step", [10, 10])
    record(reg, clock, "train.data.fetch", [35, 35])
    m = stage_metrics(stage_window("train", 0, reg.snapshot(), wall_s=0.02), cores=2)
    assert (m["perf/train/workers_needed"], m["perf/train/worker_cores"]) == (4.0, 2.0)


def test_user_series_are_reported_and_the_stages_own_are_not(reg: Registry, clock: FakeClock) -> None:
    record(reg, clock, "train.step", [10])
    record(reg, clock, "pyclipper.unclip", [1, 3])
    m = stage_metrics(stage_window("train", 0, reg.snapshot(), wall_s=0.1))
    assert m["perf/train/series/pyclipper.unclip/count"] == 2
    assert m["perf/train/series/pyclipper.unclip/total_ms"] == pytest.approx(4.0)
    assert not any("/series/train.step" in k for k in m)


def test_keys_lose_what_loggers_would_drop() -> None:
    assert (
        metric_key("perf", "train", "series", "model.<locals>.fwd") == "perf/train/series/model._locals_.fwd"
    )


def test_ranks_name_the_slowest_and_skip_a_rank_without_steps(reg: Registry, clock: FakeClock) -> None:
    record(reg, clock, "val.step", [10])
    empty = Account.empty(0.1)
    ranks = (
        RankPart(0, 0.1, 1, 0.010, empty),
        RankPart(1, 0.1, 0, 0.0, empty),
        RankPart(2, 0.1, 1, 0.030, empty),
    )
    m = stage_metrics(stage_window("val", 0, reg.snapshot(), wall_s=0.1, ranks=ranks))
    assert (m["perf/val/ranks"], m["perf/val/slowest_rank"]) == (3.0, 2.0)
    assert m["perf/val/step_ms_mean_rank_spread"] == pytest.approx(20.0)


def test_memory_peaks_come_from_gauges(reg: Registry) -> None:
    reg.gauge("process.rss_mb", 500.0)
    reg.gauge("process.rss_mb", 700.0)
    reg.gauge("cuda0.peak_allocated_mb", 1200.0)
    m = stage_metrics(stage_window("train", 0, reg.snapshot(), wall_s=1.0))
    assert (m["perf/train/process_rss_peak_mb"], m["perf/train/cuda0_allocator_peak_mb"]) == (700.0, 1200.0)
