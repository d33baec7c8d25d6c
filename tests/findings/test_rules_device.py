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
from tests.findings.test_rules import Epoch, case, epoch, fires, judged

__all__ = ["epoch"]  # the fixture, used by name
Make = Callable[[str], Epoch]


def gpu(e: Epoch, busy_percent: float, samples: int = 10) -> Epoch:
    for _ in range(samples):
        e.reg.gauge("gpu0.util_percent", busy_percent)
        e.reg.gauge("gpu0.memory_util_percent", 5.0)  # not the GPU's busy time
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


def test_a_sync_every_step_costs_the_gpu_idle_time_it_leaves_in_the_steps(epoch: Make) -> None:
    """The host blocks 2 ms a step, then works 88 ms with nothing queued: the GPU is busy 30%."""
    e = gpu(epoch("train").steps(*[90] * 10), busy_percent=30)
    e.span(stall_series("train.py:42"), *[2] * 10)
    v = fires("SYNC_STALL", case(e.window()))
    assert v.share == pytest.approx(0.70)
    assert "the GPU idles 70% of the epoch in the steps" in v.message
    assert v.evidence["stall_fraction"] == pytest.approx(0.02)


def test_a_pageable_copy_is_h2d_copys_and_not_a_sync_stall_too(epoch: Make) -> None:
    e = copies(epoch("train").steps(*[40] * 10), ms=10, mb=38.5)
    e.span(stall_series("train.py:7"), *[10] * 10)  # the same copies, seen by the sync watch
    assert judged("SYNC_STALL", case(e.window())) == []
