"""The sources: NVML against a fake ``pynvml`` module, psutil for real, torch.cuda against a fake module."""

from __future__ import annotations

import shutil
from types import SimpleNamespace
from typing import Any

import psutil
import pytest

from perfkit import PerfkitWarning
from perfkit._warn import WarnOnce
from perfkit.resources import NvmlSource, ProcessSource, SourceUnavailable, TorchCudaSource
from tests.processes import Family

MIB = 1024 * 1024


class FakeNvml:
    """The part of ``pynvml`` the source uses, with switches to make calls fail like a real driver."""

    class NVMLError(Exception):
        pass

    class NVMLError_LibraryNotFound(NVMLError):
        pass

    def __init__(self, devices: int = 2, *, missing_library: bool = False) -> None:
        self.devices = devices
        self.missing_library = missing_library
        self.failing: set[str] = set()
        self.shutdown_called = False
        self.report_process_memory = True

    def _maybe_fail(self, call: str) -> None:
        if call in self.failing:
            raise self.NVMLError(f"{call}: GPU is lost")

    def nvmlInit(self) -> None:
        if self.missing_library:
            raise self.NVMLError_LibraryNotFound("NVML Shared Library Not Found")

    def nvmlShutdown(self) -> None:
        self.shutdown_called = True

    def nvmlDeviceGetCount(self) -> int:
        return self.devices

    def nvmlDeviceGetHandleByIndex(self, i: int) -> str:
        return f"handle{i}"

    def nvmlDeviceGetMemoryInfo(self, handle: str) -> Any:
        self._maybe_fail("memory")
        return SimpleNamespace(used=3000 * MIB, total=80_000 * MIB, free=77_000 * MIB)

    def nvmlDeviceGetUtilizationRates(self, handle: str) -> Any:
        self._maybe_fail("util")
        return SimpleNamespace(gpu=95, memory=61)

    def nvmlDeviceGetComputeRunningProcesses(self, handle: str) -> list[Any]:
        self._maybe_fail("procs")
        used = 1536 * MIB if self.report_process_memory else None
        return [SimpleNamespace(pid=100, usedGpuMemory=used), SimpleNamespace(pid=999, usedGpuMemory=7 * MIB)]


def test_nvml_reports_memory_utilisation_and_this_process(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    nvml = FakeNvml()
    source = NvmlSource(nvml, pid=100)  # type: ignore[arg-type]
    source.open()
    values = source.sample(WarnOnce())
    source.close()
    assert values["gpu0.memory_used_mb"] == 3000.0
    assert values["gpu1.memory_total_mb"] == 80_000.0
    assert (values["gpu0.util_percent"], values["gpu0.memory_util_percent"]) == (95.0, 61.0)
    assert values["gpu1.process_memory_mb"] == 1536.0
    assert nvml.shutdown_called


def test_nvml_follows_cuda_visible_devices(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    source = NvmlSource(FakeNvml(devices=4))  # type: ignore[arg-type]
    source.open()
    assert {k.split(".")[0] for k in source.sample(WarnOnce())} == {"gpu1"}


def test_nvml_without_a_driver_is_unavailable_with_the_reason() -> None:
    with pytest.raises(SourceUnavailable, match="NVML could not start: .*Library Not Found"):
        NvmlSource(FakeNvml(missing_library=True)).open()  # type: ignore[arg-type]


@pytest.mark.skipif(shutil.which("nvidia-smi") is not None, reason="an NVIDIA driver is here: tests/gpu")
def test_the_real_pynvml_without_a_driver_is_unavailable() -> None:
    pytest.importorskip("pynvml")
    with pytest.raises(SourceUnavailable, match="NVML could not start"):
        NvmlSource().open()


def test_nvml_failing_mid_run_keeps_what_still_works_and_warns_once_per_kind() -> None:
    nvml = FakeNvml()
    source = NvmlSource(nvml, pid=100)  # type: ignore[arg-type]
    source.open()
    warn = WarnOnce()
    nvml.failing.add("util")
    with pytest.warns(PerfkitWarning, match="NVML utilisation of GPU 0 failed") as seen:
        first = source.sample(warn)
        second = source.sample(warn)
    assert len(seen) == 1
    assert "gpu0.util_percent" not in first
    assert first["gpu0.memory_used_mb"] == second["gpu1.memory_used_mb"] == 3000.0
    assert warn.counts["nvml.util:NVMLError"] == 4  # two devices, two samples


def test_nvml_without_per_process_figures_omits_them() -> None:
    nvml = FakeNvml()
    nvml.report_process_memory = False
    source = NvmlSource(nvml, pid=100)  # type: ignore[arg-type]
    source.open()
    assert not any(k.endswith("process_memory_mb") for k in source.sample(WarnOnce()))


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_process_source_measures_a_process_and_its_real_children() -> None:
    family, clock = Family(3), Clock()
    try:
        source = ProcessSource(pid=family.parent.pid, clock=clock)
        source.open()
        source.sample(WarnOnce())
        clock.now += 1.0  # the workers have settled: their USS is read
        values = source.sample(WarnOnce())
    finally:
        family.close()
    assert values["process.rss_mb"] > 1
    assert values["workers.count"] == 3.0
    per_child = [values[f"worker{i}.rss_mb"] for i in range(3)]
    assert values["workers.rss_mb"] == pytest.approx(sum(per_child))
    assert 0 < values["system.memory_percent"] < 100
    # what the workers cost on their own, beside their RSS (which counts shared pages too)
    assert 0 < values["workers.uss_mb"] < values["workers.pss_mb"] < values["workers.rss_mb"]
    assert values["workers.uss_mb"] == pytest.approx(sum(values[f"worker{i}.uss_mb"] for i in range(3)))


def test_a_worker_in_its_first_second_has_its_rss_read_but_not_its_page_tables() -> None:
    """Reading a worker's USS walks its page tables under its memory map's lock: in its first
    moments (forking, its first batch) that held up its start, and each epoch's first batch."""
    family, clock = Family(2), Clock()
    try:
        source = ProcessSource(pid=family.parent.pid, clock=clock)
        source.open()
        young = source.sample(WarnOnce())
        clock.now += 0.5
        still = source.sample(WarnOnce())
        clock.now += 0.5
        settled = source.sample(WarnOnce())
    finally:
        family.close()
    assert young["workers.count"] == still["workers.count"] == 2.0
    assert "workers.uss_mb" not in young
    assert "workers.uss_mb" not in still  # a read is due once a second; the workers are not yet a second old
    assert settled["workers.uss_mb"] > 0


class ChildExitsWhenRead:
    """psutil, except that reading a child's memory first kills that child for real."""

    def __init__(self, family: Family, victim: int) -> None:
        self.family, self.victim = family, victim
        self.NoSuchProcess = psutil.NoSuchProcess
        self.AccessDenied = psutil.AccessDenied
        self.Error = psutil.Error
        self.virtual_memory = psutil.virtual_memory

    def Process(self, pid: int | None = None) -> Any:
        proc = psutil.Process(pid)
        if pid == self.victim:
            real = proc.memory_info

            def memory_info() -> Any:
                self.family.kill(self.victim)
                return real()

            proc.memory_info = memory_info  # type: ignore[method-assign]
        return proc


def test_a_child_that_exits_between_listing_and_reading_is_skipped() -> None:
    family = Family(2)
    try:
        source = ProcessSource(ChildExitsWhenRead(family, family.children[1]), pid=family.parent.pid)  # type: ignore[arg-type]
        source.open()
        values = source.sample(WarnOnce())
    finally:
        family.close()
    assert values["workers.count"] == 1.0


def test_torch_cuda_source_needs_cuda() -> None:
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA; tests/gpu covers it")
    with pytest.raises(SourceUnavailable, match="no CUDA device"):
        TorchCudaSource().open()


def test_torch_cuda_source_resets_the_peak_after_each_reading() -> None:
    peaks = [900 * MIB, 300 * MIB]
    resets: list[int] = []
    cuda = SimpleNamespace(
        is_available=lambda: True,
        is_initialized=lambda: True,
        device_count=lambda: 1,
        memory_allocated=lambda i: 200 * MIB,
        memory_reserved=lambda i: 1024 * MIB,
        max_memory_allocated=lambda i: peaks[len(resets)],
        reset_peak_memory_stats=lambda i: resets.append(i),
    )
    source = TorchCudaSource(SimpleNamespace(cuda=cuda))  # type: ignore[arg-type]
    source.open()
    first, second = source.sample(WarnOnce()), source.sample(WarnOnce())
    assert (first["cuda0.peak_allocated_mb"], second["cuda0.peak_allocated_mb"]) == (900.0, 300.0)
    assert first["cuda0.reserved_mb"] == 1024.0
    assert resets == [0, 0]


class LazyCuda:
    """torch.cuda before and after this process's first CUDA tensor: the caching allocator exists
    only from then on, and ``reset_peak_memory_stats`` before it raises what an H200 raised."""

    def __init__(self) -> None:
        self.initialized = False
        self.calls: list[str] = []

    def is_available(self) -> bool:
        return True

    def is_initialized(self) -> bool:
        return self.initialized

    def device_count(self) -> int:
        return 1

    def memory_allocated(self, i: int) -> int:
        self.calls.append("memory_allocated")
        return 64 * MIB if self.initialized else 0

    def memory_reserved(self, i: int) -> int:
        return 128 * MIB if self.initialized else 0

    def max_memory_allocated(self, i: int) -> int:
        return 96 * MIB if self.initialized else 0

    def reset_peak_memory_stats(self, i: int) -> None:
        if not self.initialized:
            raise RuntimeError("Invalid device argument ")
        self.calls.append("reset")


def test_torch_cuda_source_reads_nothing_before_torch_has_used_cuda() -> None:
    cuda = LazyCuda()
    source = TorchCudaSource(SimpleNamespace(cuda=cuda))  # type: ignore[arg-type]
    source.open()
    warn = WarnOnce()
    assert source.sample(warn) == {}
    assert cuda.calls == []  # no call at all: none of them may initialise CUDA
    cuda.initialized = True  # the program's first tensor on the device
    values = source.sample(warn)
    assert values["cuda0.allocated_mb"] == 64.0
    assert values["cuda0.peak_allocated_mb"] == 96.0
    assert cuda.calls == ["memory_allocated", "reset"]
    assert warn.counts == {}


def test_a_machine_without_an_nvidia_driver_says_so_only_at_debug(caplog: pytest.LogCaptureFixture) -> None:
    import logging

    from perfkit import Registry, ResourceSampler

    caplog.set_level(logging.DEBUG, logger="perfkit")
    with ResourceSampler(0.05, registry=Registry(), sources=["nvml", "process"]):
        pass
    off = [r for r in caplog.records if "'nvml' is off" in r.getMessage()]
    assert [r.levelno for r in off] == [logging.DEBUG]  # the real pynvml here: no driver at all
