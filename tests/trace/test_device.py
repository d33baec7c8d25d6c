"""Device activity: busy over every kind of device work, idle gaps by cause, copies' bandwidth, overlap.

Hand-built traces (µs from 0); a kernel's launch is a ``cuda_runtime`` event with the same correlation.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from perfkit.trace import CommOverlap, StreamIdle, TraceAnalysis, TransferStat, analyze_trace
from tests.trace.trace_builder import Event, kernel, op, step, write_trace


def analyze(tmp_path: Path, events: list[Event], **kwargs: Any) -> TraceAnalysis:
    return analyze_trace(write_trace(tmp_path / "t.json", events), **kwargs)


def launched(name: str, ts: float, dur: float, at: float, corr: int, **kwargs: Any) -> list[Event]:
    """A kernel and the CPU call that launched it at ``at``."""
    runtime = {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 100, "tid": 100}
    runtime |= {"ts": at, "dur": 1, "args": {"correlation": corr}}
    k = kernel(name, ts, dur, **kwargs)
    k["args"] = {"correlation": corr}
    return [runtime, k]


def test_every_kind_of_device_work_is_busy_time_and_kernels_alone_are_shown_beside(tmp_path: Path) -> None:
    events = [
        step(1, 0, 100),
        kernel("gemm", 0, 10),
        kernel("Memset (Device)", 10, 10, cat="gpu_memset"),
        kernel("Memcpy DtoD", 20, 10, cat="Memcpy"),  # older torch's category
        kernel("fc-dtype_Float", 30, 10, cat="mtia_ccp_events"),  # an MTIA kernel
        kernel("dma_request", 40, 10, cat="mtia_ccp_events"),  # an MTIA copy
        kernel("void relu<float>(float*)", 50, 10, cat="cuda_profiler_range"),  # CUPTI range profiler
    ]
    a = analyze(tmp_path, events)
    assert (a.gpu_busy_share, a.kernel_busy_share) == (pytest.approx(0.6), pytest.approx(0.3))
    assert {(k.name, k.kind) for k in a.top_cuda_kernels} >= {
        ("dma_request", "memcpy"),
        ("fc-dtype_Float", "kernel"),
    }


def test_work_launched_before_profiling_started_is_busy_and_said(tmp_path: Path) -> None:
    events = [step(1, 0, 100), kernel("queued earlier", 0, 30), *launched("gemm", 40, 20, at=35, corr=7)]
    a = analyze(tmp_path, events)
    assert (a.gpu_busy_share, a.unlaunched_device_us) == (pytest.approx(0.5), 30)


def test_idle_gaps_are_host_wait_kernel_wait_or_other_as_hta_splits_them(tmp_path: Path) -> None:
    events = [
        step(1, 0, 120),
        *launched("k1", 0, 10, at=-5, corr=1),
        *launched("k2", 20, 10, at=15, corr=2),  # launched after k1 ended: 10 µs of host wait
        *launched("k3", 40, 10, at=25, corr=3),  # launched in time, a 10 µs gap: kernel wait
        *launched("k4", 100, 10, at=28, corr=4),  # launched in time, a 50 µs gap: other
    ]
    a = analyze(tmp_path, events)
    assert a.idle == (
        StreamIdle("all streams", 40, host_wait_us=10, kernel_wait_us=10, other_us=50),
        StreamIdle("device 0 stream 7", 40, host_wait_us=10, kernel_wait_us=10, other_us=50),
    )
    finding = next(f for f in a.findings if f.kind == "GPU_IDLE")
    assert finding.message == (
        "the GPU is idle 66.7% of the profiled time (busy 33.3%), but not for the CPU: the next kernel was"
        " already launched in 86% of its idle time (kernel wait 14%, other 71%: synchronisation, other"
        " streams or communication)"
    )


def test_the_gpu_waits_for_the_cpu_only_when_host_wait_dominates(tmp_path: Path) -> None:
    events = [step(1, 0, 100), *launched("k1", 0, 10, at=0, corr=1), *launched("k2", 90, 10, at=85, corr=2)]
    finding = next(f for f in analyze(tmp_path, events).findings if f.kind == "GPU_IDLE")
    assert finding.message == (
        "the GPU is idle 80.0% of the profiled time (busy 20.0%): it waits for the CPU"
        " (the next kernel was not launched yet in 100% of its idle time)"
    )


def test_the_device_idle_row_counts_only_gaps_when_no_stream_is_busy(tmp_path: Path) -> None:
    events = [
        step(1, 0, 100),
        *launched("a", 0, 50, at=0, corr=1),
        *launched("b", 10, 20, at=0, corr=2, stream=8),
        *launched("c", 60, 10, at=0, corr=3, stream=8),  # stream 8 idles 30..60, the device 50..60
    ]
    device, *streams = analyze(tmp_path, events).idle
    assert (device.busy_us, device.idle_us) == (60, 10)
    assert [(s.stream, s.busy_us, s.other_us) for s in streams] == [
        ("device 0 stream 7", 50, 0),
        ("device 0 stream 8", 30, 30),
    ]


def test_communication_kernels_overlap_compute_and_what_runs_alone_is_a_finding(tmp_path: Path) -> None:
    events = [
        step(1, 0, 100),
        kernel("ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*)", 0, 50, stream=20),
        kernel("void ncclDevKernel_SendRecv(ncclDevComm*)", 80, 10, stream=20),
        kernel("cutlass::Kernel<gemm>", 25, 50),
    ]
    a = analyze(tmp_path, events)
    assert a.comm == CommOverlap(comm_us=60, compute_us=50, overlap_us=25, overlap_share=25 / 60)
    exposed = next(f for f in a.findings if f.kind == "EXPOSED_COMM")
    assert (exposed.share, exposed.message) == (
        pytest.approx(0.35),
        "communication kernels run alone 35.0% of step time (only 42% of their time overlaps compute)",
    )


def test_a_trace_without_communication_kernels_has_no_overlap(tmp_path: Path) -> None:
    assert analyze(tmp_path, [step(1, 0, 10), kernel("gemm", 0, 5)]).comm is None


def test_copies_and_fills_have_their_bandwidth_where_the_trace_gives_bytes(tmp_path: Path) -> None:
    copy = kernel("Memcpy HtoD (Pinned -> Device)", 0, 1000, cat="gpu_memcpy")
    copy["args"] = {"bytes": 12_000_000_000}
    copy2 = {**copy, "ts": 2000, "dur": 500, "args": {"bytes": 3_000_000_000}}
    fill = kernel("Memset (Device)", 3000, 10, cat="gpu_memset")  # no bytes: no bandwidth
    dma = kernel("dma_request", 4000, 100, cat="mtia_ccp_events")
    dma["args"] = {"size": 1_000_000}
    a = analyze(tmp_path, [step(1, 0, 5000), copy, copy2, fill, dma])
    assert a.transfers == (
        TransferStat("Memcpy HtoD (Pinned -> Device)", "memcpy", 2, 1500, 15_000_000_000, 10_000.0),
        TransferStat("dma_request", "memcpy", 1, 100, 1_000_000, 10.0),
        TransferStat("Memset (Device)", "memset", 1, 10, 0, None),
    )


def test_without_steps_the_window_reaches_the_device_work_beyond_the_cpu_ranges(tmp_path: Path) -> None:
    a = analyze(tmp_path, [op("aten::mm", 10, 30), kernel("queued earlier", 0, 10), kernel("gemm", 35, 25)])
    assert (a.span_us, a.gpu_busy_share) == (60, pytest.approx(35 / 60))


def test_idle_rows_are_the_device_then_top_k_streams(tmp_path: Path) -> None:
    events = [step(1, 0, 100), *(kernel(f"k{i}", i, 1 + i, stream=i) for i in range(6))]
    a = analyze(tmp_path, events, top_k=3)
    assert [s.stream for s in a.idle] == [
        "all streams",
        "device 0 stream 5",
        "device 0 stream 4",
        "device 0 stream 3",
    ]
