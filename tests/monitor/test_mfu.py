"""MFU through a session, on CPU with a stated peak: the FLOPs of the first training step counted
once (torch's FlopCounterMode), the MFU of each epoch against the analytic count; without a peak,
no MFU (and nothing counted)."""

from __future__ import annotations

import time

import pytest
import torch

import perfkit
from perfkit.monitor import Options, Session

N, STEPS = 256, 20
FLOPS = 2 * N**3  # one N x N x N matmul


def matmuls(session: Session) -> tuple[float, float]:
    """Two epochs of ``STEPS`` matmuls; the last epoch's steps' seconds by the test's clock."""
    a = torch.randn(N, N)
    seconds = 0.0
    for epoch in range(2):
        session.begin("train", epoch)
        seconds = 0.0
        for _ in range(STEPS):
            session.recorder.step_begin("train")
            t0 = time.perf_counter()
            a @ a
            seconds += time.perf_counter() - t0
            session.recorder.step_end("train")
        session.end("train")
    return seconds, STEPS * FLOPS / seconds


def test_mfu_of_a_matmul_loop_is_within_a_tenth_of_the_analytic_count() -> None:
    torch.set_num_threads(1)
    session = Session(
        Options(registry=perfkit.Registry(), console=False, sample_resources=False, peak_tflops=0.05)
    )
    _, achieved = matmuls(session)
    assert session.monitor is not None
    mfu = session.monitor.last_metrics["train"]["perf/train/mfu_fraction"]
    truth = achieved / 0.05e12
    assert mfu == pytest.approx(truth, rel=0.10)  # the step's time holds the recorder's own microseconds


def test_without_a_peak_there_is_no_mfu_and_nothing_is_counted() -> None:
    session = Session(Options(registry=perfkit.Registry(), console=False, sample_resources=False))
    matmuls(session)
    assert session.monitor is not None
    assert "perf/train/mfu_fraction" not in session.monitor.last_metrics["train"]


def test_stated_flops_without_a_peak_or_a_device_abstain() -> None:
    session = Session(
        Options(registry=perfkit.Registry(), console=False, sample_resources=False, flops_per_step=FLOPS)
    )
    matmuls(session)
    assert session.monitor is not None
    assert "perf/train/mfu_fraction" not in session.monitor.last_metrics["train"]
