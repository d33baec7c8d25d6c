"""count_flops on CPU: FlopCounterMode's count of a real step, split by dtype; MFU of a matmul loop."""

from __future__ import annotations

import time

import pytest

torch = pytest.importorskip("torch")

import perfkit  # noqa: E402
import perfkit.torch  # noqa: E402
from perfkit.resources import device_peak, mfu, step_mfu  # noqa: E402

M, N, K = 256, 192, 320


def test_a_matmul_counts_two_m_n_k() -> None:
    a, b = torch.randn(M, K), torch.randn(K, N)
    with perfkit.torch.count_flops() as counted:
        for _ in range(3):
            a @ b
    assert counted.total == 3 * 2 * M * N * K
    assert counted.by_dtype == {"fp32": 3 * 2 * M * N * K}


def test_a_training_step_counts_forward_and_backward_in_the_dtype_they_ran() -> None:
    layer = torch.nn.Linear(K, N, bias=False)
    x = torch.randn(M, K)
    with perfkit.torch.count_flops() as counted:
        layer(x).sum().backward()
    forward = 2 * M * K * N
    assert counted.total == 2 * forward  # backward: the weight's gradient only (x needs none)
    x.requires_grad_(True)
    with perfkit.torch.count_flops() as both:
        layer(x).sum().backward()
    assert both.total == 3 * forward  # and now x's gradient too
    with perfkit.torch.count_flops() as mixed, torch.autocast("cpu", dtype=torch.bfloat16):
        layer(x).sum().backward()
    assert set(mixed.by_dtype) == {"bf16"}
    assert mixed.shares() == {"bf16": 1.0}


def test_a_step_that_raises_leaves_the_count_empty_and_the_modes_popped() -> None:
    def failing_step() -> None:
        torch.randn(4, 4) @ torch.randn(4, 4)
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"), perfkit.torch.count_flops() as counted:
        failing_step()
    assert counted.total == 0
    with perfkit.torch.count_flops() as again:  # nothing left on the mode stack
        torch.randn(2, 2) @ torch.randn(2, 2)
    assert again.total == 16


def test_mfu_of_a_matmul_loop_matches_the_analytic_count_within_ten_percent() -> None:
    """perfkit's MFU (counted FLOPs, its window's step times) against the truth (2*M*N*K per
    matmul, the test's own clock around each step), with a stated peak: CPU has no table entry."""
    a, b = torch.randn(M, K), torch.randn(K, N)
    matmuls_per_step, steps, peak_tflops = 4, 30, 0.5

    def step() -> None:
        for _ in range(matmuls_per_step):
            a @ b

    step()  # warm up the kernels
    with perfkit.torch.count_flops() as counted:
        step()
    reg = perfkit.Registry()
    own_s = 0.0
    with perfkit.window("train", epoch=0, registry=reg, console=False) as w:
        for _ in w.iterate(range(steps)):
            t0 = time.perf_counter()
            step()
            own_s += time.perf_counter() - t0
    analytic = 2 * M * N * K * matmuls_per_step
    truth = analytic * steps / own_s / (peak_tflops * 1e12)
    measured = step_mfu(w.window.snapshot, "train", counted.total, peak=peak_tflops)  # type: ignore[union-attr]
    assert measured.fraction == pytest.approx(truth, rel=0.10)
    assert counted.total == analytic


def test_without_a_peak_mfu_abstains_on_cpu_saying_why() -> None:
    result = mfu(1e9, steps=10, seconds=1.0, peak=device_peak(None, "fp32"))
    assert result.fraction is None
    assert result.line == "MFU unknown: no CUDA device to look up: state the peak with peak_tflops="
