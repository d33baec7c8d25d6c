"""On a real NVIDIA GPU: the NVML and torch.cuda sources, and cuda=True sections against hand-made events.

Skipped without CUDA. Run them on a GPU machine with ``pytest tests/gpu -m gpu``.
"""

from __future__ import annotations

import pytest

import perfkit
from perfkit._warn import WarnOnce

torch = pytest.importorskip("torch")
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]


def matmul_loop(n: int = 20, size: int = 4096) -> None:
    a = torch.randn(size, size, device="cuda")
    for _ in range(n):
        a = (a @ a).tanh_()


def test_nvml_sees_the_memory_this_process_allocated() -> None:
    source = perfkit.resources.NvmlSource()
    source.open()
    block = torch.empty(1024 * 1024 * 1024, dtype=torch.uint8, device="cuda")  # 1 GiB
    values = source.sample(WarnOnce())
    source.close()
    del block
    assert values["gpu0.memory_total_mb"] > 1024
    assert values["gpu0.memory_used_mb"] >= 1024
    if "gpu0.process_memory_mb" in values:  # some containers hide per-process figures
        assert values["gpu0.process_memory_mb"] >= 1024


def test_torch_cuda_source_reports_each_window_its_own_peak() -> None:
    reg = perfkit.Registry()
    sampler = perfkit.ResourceSampler(60, registry=reg, sources=["torch_cuda"]).start()
    first = reg.cursor()
    big = torch.empty(2 * 1024**3, dtype=torch.uint8, device="cuda")
    del big
    sampler.sample_now()
    second = reg.cursor()
    small = torch.empty(256 * 1024**2, dtype=torch.uint8, device="cuda")
    del small
    sampler.sample_now()
    end = reg.snapshot(since=second)
    sampler.stop()
    assert reg.snapshot(since=first).gauges["cuda0.peak_allocated_mb"].max >= 2048
    assert end.gauges["cuda0.peak_allocated_mb"].max < 1024


def test_cuda_section_matches_events_timed_by_hand() -> None:
    matmul_loop(2)  # warm up cuBLAS
    torch.cuda.synchronize()
    reg = perfkit.Registry()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(5):
        start.record()
        with perfkit.section("matmul", registry=reg, cuda=True):
            matmul_loop()
        end.record()
    torch.cuda.synchronize()
    by_hand_s = start.elapsed_time(end) / 1e3  # the last iteration, in seconds
    snap = reg.snapshot()
    gpu = snap["matmul.gpu"]
    assert gpu.count == 5
    assert gpu.max_s == pytest.approx(by_hand_s, rel=0.05)
    # the host only queued the work: its time is far below the GPU's
    assert snap["matmul"].mean_s < gpu.mean_s
