"""On a real NVIDIA GPU: the sync watch, FLOP counting by dtype, copies and the peak table.

Skipped without CUDA. What these confirm is what the CPU tests could only fake: torch's sync debug
mode warns once per synchronizing call, after the wait, at the caller's line; the watch's wrappers
time exactly those; a masked index is seen but not timed; pinned bytes are counted as pinned.
"""

from __future__ import annotations

import inspect
import subprocess
import sys
import time

import pytest

import perfkit
import perfkit.torch
from perfkit.resources import copy_stats, device_peak, stall_sites

torch = pytest.importorskip("torch")
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]
HERE = "tests/gpu/test_device_timers.py"


A = None


def busy(ms: float) -> None:
    """Queue about ``ms`` of GPU work on an H100/H200: fp32 4096^3 matmuls (~2.7 ms each at 50 TFLOP/s)."""
    global A
    if A is None:
        A = torch.randn(4096, 4096, device="cuda")
    for _ in range(max(1, round(ms / 2.5))):
        A @ A


def test_the_sync_watch_times_each_item_at_its_line() -> None:
    reg = perfkit.Registry()
    x = torch.ones(1, device="cuda")
    own: list[float] = []
    with perfkit.torch.watch_syncs(reg) as watch:
        assert watch.active, watch.reason
        for _ in range(5):
            busy(20)
            t0 = time.perf_counter()
            line = inspect.currentframe().f_lineno + 1  # type: ignore[union-attr]
            x.item()
            own.append(time.perf_counter() - t0)
    sites = stall_sites(reg.snapshot())
    timed = [s for s in sites if s.timed]
    assert [(s.site, s.count) for s in timed] == [(f"{HERE}:{line}", 5)]
    assert timed[0].total_s == pytest.approx(sum(own), rel=0.2)
    assert timed[0].mean_s > 0.01  # the 20 ms of queued work, not the warning's few µs
    assert not [s for s in sites if not s.timed]


def test_a_masked_index_is_counted_untimed_and_cpu_calls_not_at_all() -> None:
    reg = perfkit.Registry()
    x = torch.randn(1000, device="cuda")
    with perfkit.torch.watch_syncs(reg):
        line = inspect.currentframe().f_lineno + 1  # type: ignore[union-attr]
        x[x > 0]
        torch.ones(1).item()  # a CPU tensor: no sync
        x.to("cuda")  # already there: no sync
    sites = stall_sites(reg.snapshot())
    assert [(s.site, s.timed) for s in sites] == [(f"{HERE}:{line}", False)]


def test_the_watch_restores_the_debug_mode_and_methods() -> None:
    item, mode = torch.Tensor.item, torch.cuda.get_sync_debug_mode()
    with perfkit.torch.watch_syncs():
        assert torch.cuda.get_sync_debug_mode() == 1
    assert torch.Tensor.item is item
    assert torch.cuda.get_sync_debug_mode() == mode


def test_a_sessions_watch_times_the_stage_epochs_syncs_and_is_off_between_them() -> None:
    from perfkit.monitor import Options, Session

    item, mode = torch.Tensor.item, torch.cuda.get_sync_debug_mode()
    session = Session(
        Options(registry=perfkit.Registry(), console=False, sample_resources=False, flops_per_step=1.0)
    )
    x = torch.ones(1, device="cuda")
    session.begin("train", 0)
    for _ in range(3):
        session.recorder.step_begin("train")
        busy(10)
        line = inspect.currentframe().f_lineno + 1  # type: ignore[union-attr]
        x.item()
        session.recorder.step_end("train")
    window = session.end("train")
    assert torch.Tensor.item is item
    assert torch.cuda.get_sync_debug_mode() == mode
    assert window is not None
    timed = [(s.site, s.count) for s in stall_sites(window.snapshot) if s.timed]
    assert timed == [(f"{HERE}:{line}", 3)]
    session.close()


def test_count_flops_books_cuda_matmuls_to_the_dtype_they_ran_in() -> None:
    a = torch.randn(512, 512, device="cuda")
    with perfkit.torch.count_flops() as bf16, torch.autocast("cuda", dtype=torch.bfloat16):
        a @ a
    assert bf16.by_dtype == {"bf16": 2 * 512**3}
    previous = torch.get_float32_matmul_precision()
    try:
        torch.set_float32_matmul_precision("high")
        with perfkit.torch.count_flops() as tf32:
            a @ a
        torch.set_float32_matmul_precision("highest")
        with perfkit.torch.count_flops() as fp32:
            a @ a
    finally:
        torch.set_float32_matmul_precision(previous)
    assert set(tf32.by_dtype) == {"tf32"}
    assert set(fp32.by_dtype) == {"fp32"}


def test_this_gpu_has_a_peak_or_says_why() -> None:
    peak = device_peak(torch.cuda.get_device_name(0), "bf16")
    assert peak.tflops is not None or "peak_tflops=" in peak.reason


def test_a_pinned_copy_is_counted_pinned_and_timed_on_the_stream() -> None:
    reg = perfkit.Registry()
    pageable = torch.randn(4 * 2**20)
    pinned = pageable.pin_memory()
    with perfkit.torch.time_copy(pinned, registry=reg):
        pinned.to("cuda", non_blocking=True)
    with perfkit.torch.time_copy(pageable, registry=reg):
        pageable.to("cuda")
    found = copy_stats(reg.snapshot())
    assert found is not None
    assert found.count == 2
    assert found.pinned_fraction == pytest.approx(0.5)
    assert found.gpu_s is not None
    assert found.gpu_s > 0
    assert (perfkit.torch.pinned_bandwidth() or 0) > 1.0  # GB/s


def test_the_torch_cuda_source_says_nothing_before_the_first_allocation() -> None:
    code = (
        "import warnings, torch\n"
        "from perfkit._warn import WarnOnce\n"
        "from perfkit.resources import TorchCudaSource\n"
        "s = TorchCudaSource(); s.open(); w = WarnOnce()\n"
        "assert s.sample(w) == {} and not w.counts, w.counts\n"
        "x = torch.ones(1024, device='cuda')\n"
        "v = s.sample(w)\n"
        "assert v['cuda0.allocated_mb'] > 0 and not w.counts, (v, w.counts)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
