"""The GPU's own account on faked device timelines (no GPU here: the device boundary is faked at
its readings -- NVML's utilisation samples, the sync watch's and copy timer's records -- and a
fake clock gives each window a wall time of one second, so a share is the planted seconds):
SYNC_STALL, H2D_COPY, HOST_BOUND and GPU_IDLE fire with the share their numbers give, stay silent
just below their thresholds, and say nothing where the device was not read; COMPUTE_BOUND carries
the MFU where the step's FLOPs and the device's peak were recorded."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from perfkit.findings import diagnose_windows
from perfkit.names import FLOPS_PER_STEP, H2D_BYTES, H2D_COPY, H2D_PINNED_BYTES, PEAK_FLOPS, stall_series
from perfkit.stages import stage_metrics
from tests.findings.test_rules import Epoch, case, epoch, fires, judged

__all__ = ["epoch"]  # the fixture, used by name
Make = Callable[[str], Epoch]


def gpu(e: Epoch, busy_percent: float, samples: int = 10, every_s: float = 0.25) -> Epoch:
    """NVML's samples, ``every_s`` apart (10 of them cover 2.25 s: enough to read a busy share)."""
    t0 = e.clock()
    for i in range(samples):
        t = t0 + round(i * every_s * 1e9)
        e.reg.gauge("gpu0.util_percent", busy_percent, t_ns=t)
        e.reg.gauge("gpu0.memory_util_percent", 5.0, t_ns=t)  # not the GPU's busy time
    return e


# ---- SYNC_STALL ------------------------------------------------------------------------------------


def test_sync_stall_fires_with_the_hosts_time_blocked_and_names_the_call_site(epoch: Make) -> None:
    e = epoch("train").steps(*[50] * 10)
    e.span(stall_series("train.py:42"), *[8] * 10)  # loss.item() each step: 80 ms
    v = fires("SYNC_STALL", case(e.window()))
    assert (v.share, v.subject) == (pytest.approx(0.08), "train.py:42")
    assert "train.py:42 (10 calls, 8.00 ms each)" in v.message
    assert "every N steps" in v.action


def test_sync_stall_is_silent_below_a_twentieth_of_the_epoch(epoch: Make) -> None:
    e = epoch("train").steps(*[50] * 10)
    e.span(stall_series("train.py:42"), *[4.9] * 10)
    assert judged("SYNC_STALL", case(e.window())) == []


def test_sync_stall_says_nothing_where_syncs_were_only_seen_not_timed(epoch: Make) -> None:
    e = epoch("train").steps(*[50] * 10)
    e.span(stall_series("train.py:9", timed=False), *[0] * 10)
    assert judged("SYNC_STALL", case(e.window())) == []


# ---- H2D_COPY --------------------------------------------------------------------------------------


def copies(e: Epoch, ms: float, mb: float, pinned: bool = False) -> Epoch:
    for _ in range(10):
        e.span(H2D_COPY, ms)
        e.reg.gauge(H2D_BYTES, mb * 1e6)
        e.reg.gauge(H2D_PINNED_BYTES, mb * 1e6 if pinned else 0.0)
    return e


def test_h2d_copy_fires_for_pageable_copies_with_pinning_and_its_gain(epoch: Make) -> None:
    e = copies(epoch("train").steps(*[40] * 10), ms=10, mb=38.5)
    v = fires("H2D_COPY", case(e.window()))
    assert v.share == pytest.approx(0.10)
    assert "0% pinned" in v.message
    assert v.change.get("pin_memory") is True
    assert v.gain is not None
    assert 0 <= v.gain[0] <= v.gain[1] <= v.share


def test_h2d_copy_is_silent_below_a_twentieth_of_the_epoch(epoch: Make) -> None:
    e = copies(epoch("train").steps(*[40] * 10), ms=4.9, mb=38.5)
    assert judged("H2D_COPY", case(e.window())) == []


def test_h2d_copy_says_nothing_where_no_copy_was_timed(epoch: Make) -> None:
    assert judged("H2D_COPY", case(epoch("train").steps(*[40] * 10).window())) == []


# ---- HOST_BOUND and GPU_IDLE -----------------------------------------------------------------------


def test_host_bound_fires_for_a_busy_step_and_an_idle_gpu(epoch: Make) -> None:
    e = gpu(epoch("train").steps(*[90] * 10), busy_percent=20)  # step 90%, GPU busy 20%
    v = fires("HOST_BOUND", case(e.window()))
    assert v.share == pytest.approx(0.70)
    assert "CUDA graphs" in v.action


def test_host_bound_is_silent_below_its_threshold(epoch: Make) -> None:
    e = gpu(epoch("train").steps(*[90] * 10), busy_percent=71)  # the GPU idles 19% of the step at most
    assert judged("HOST_BOUND", case(e.window())) == []


def test_host_bound_says_nothing_without_gpu_readings(epoch: Make) -> None:
    assert judged("HOST_BOUND", case(epoch("train").steps(*[90] * 10).window())) == []


def test_gpu_idle_fires_with_the_idle_share_and_the_part_that_explains_it(epoch: Make) -> None:
    e = gpu(epoch("train").waits(*[60] * 10).steps(*[30] * 10), busy_percent=25)
    v = fires("GPU_IDLE", case(e.window()))
    assert (v.share, v.subject) == (pytest.approx(0.75), "data wait")


def test_gpu_idle_is_silent_below_half_the_epoch(epoch: Make) -> None:
    e = gpu(epoch("train").waits(*[60] * 10).steps(*[30] * 10), busy_percent=51)
    assert judged("GPU_IDLE", case(e.window())) == []


def test_gpu_idle_says_nothing_without_gpu_readings(epoch: Make) -> None:
    assert judged("GPU_IDLE", case(epoch("train").waits(*[60] * 10).window())) == []


def test_an_idle_gpu_is_said_with_the_data_wait_that_explains_it(epoch: Make) -> None:
    e = gpu(epoch("train").waits(*[60] * 10).steps(*[30] * 10), busy_percent=25)
    d = diagnose_windows([e.window()], cores=4)
    first = d.verdicts[0]
    assert first.kind == "INPUT_BOUND"
    assert "the GPU is idle 75%" in first.context
    assert "GPU_IDLE" not in {v.kind for v in d.verdicts}


# ---- MFU, context on COMPUTE_BOUND -----------------------------------------------------------------


def test_compute_bound_says_the_mfu_where_flops_and_the_peak_were_recorded(epoch: Make) -> None:
    e = gpu(epoch("train").steps(*[90] * 10), busy_percent=97)  # 900 ms of steps, GPU busy
    e.reg.gauge(FLOPS_PER_STEP, 3.42e13)  # 10 steps in 0.9 s: 380 TFLOP/s
    e.reg.gauge(PEAK_FLOPS, 989.5e12)
    v = fires("COMPUTE_BOUND", case(e.window()))
    assert "the GPU is busy 97% at 38% MFU: 380 of 990 TFLOP/s" in v.message
    assert "the kernels are the limit" in v.action


def test_compute_bound_says_no_mfu_without_a_peak(epoch: Make) -> None:
    e = epoch("train").steps(*[90] * 10)
    e.reg.gauge(FLOPS_PER_STEP, 3.42e13)
    v = fires("COMPUTE_BOUND", case(e.window()))
    assert "MFU" not in v.message


def test_a_sync_every_step_costs_the_hosts_other_work_it_keeps_from_overlapping_the_gpu(
    epoch: Make,
) -> None:
    """A step of 90 ms: the host blocks 60 ms on the GPU's work, then does 30 ms of its own with
    nothing queued. Without the sync the two overlap: the step takes max(60, 30), saving 30 ms."""
    e = gpu(epoch("train").steps(*[90] * 10), busy_percent=70)
    e.span(stall_series("train.py:42"), *[60] * 10)
    v = fires("SYNC_STALL", case(e.window()))
    assert v.share == pytest.approx(0.30)
    assert v.evidence["stall_fraction"] == pytest.approx(0.60)
    assert "overlapping the two would save up to 30% of the epoch" in v.message


def test_a_sync_costs_no_more_than_the_time_the_gpu_idles(epoch: Make) -> None:
    e = gpu(epoch("train").steps(*[90] * 10), busy_percent=88)  # NVML: idle 12%
    e.span(stall_series("train.py:42"), *[45] * 10)  # blocked 45%, the host's own 45%
    assert fires("SYNC_STALL", case(e.window())).share == pytest.approx(0.12)


def test_one_sync_at_the_end_of_a_loop_that_kept_the_gpu_busy_is_no_stall(epoch: Make) -> None:
    """The host queues the epoch's work and waits once at the end: blocked 87%, nothing to gain."""
    e = gpu(epoch("train").steps(*[10] * 9, 880), busy_percent=97)
    e.span(stall_series("train.py:50"), 870)
    assert judged("SYNC_STALL", case(e.window())) == []


def test_a_host_bound_step_leaves_the_syncs_share_to_sync_stall(epoch: Make) -> None:
    """Step 90%, GPU busy 50%, a sync blocking 40 ms a step: the GPU's idle 40% is the sync's."""
    e = gpu(epoch("train").steps(*[90] * 10), busy_percent=50)
    e.span(stall_series("train.py:42"), *[40] * 10)
    assert fires("SYNC_STALL", case(e.window())).share == pytest.approx(0.40)
    assert judged("HOST_BOUND", case(e.window())) == []


def test_nvml_samples_covering_less_than_two_seconds_read_no_busy_share(epoch: Make) -> None:
    """NVML's utilisation lags by up to a 1 s sample period: a short window cannot read it."""
    short = gpu(epoch("train").steps(*[90] * 10), busy_percent=20, every_s=0.1)  # 0.9 s of samples
    assert judged("HOST_BOUND", case(short.window())) == []
    assert "perf/train/gpu_busy_fraction" not in stage_metrics(short.window())
    long = gpu(epoch("train").steps(*[90] * 10), busy_percent=20, every_s=0.25)  # 2.25 s
    assert stage_metrics(long.window())["perf/train/gpu_busy_fraction"] == pytest.approx(0.20)


def test_a_pageable_copy_is_h2d_copys_and_not_a_sync_stall_too(epoch: Make) -> None:
    e = copies(epoch("train").steps(*[40] * 10), ms=10, mb=38.5)
    e.span(stall_series("train.py:7"), *[10] * 10)  # the same copies, seen by the sync watch
    assert judged("SYNC_STALL", case(e.window())) == []
