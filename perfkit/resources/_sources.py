"""What the resource sampler reads: NVML, this process and its children (psutil), torch.cuda.

Each source is optional. ``open()`` raises ``SourceUnavailable`` with a reason a
user can act on (the extra to install, no GPU); ``sample()`` returns gauge values
by name, units in the name. A fault on one item (a child that exited, one NVML
call the driver does not support) is reported through ``warn`` once per kind
and the other items are still returned. The module each source reads is a
constructor argument, so tests pass a fake ``pynvml`` at the module boundary.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
import time
from collections.abc import Callable
from types import ModuleType
from typing import Any, Protocol

from .._warn import WarnOnce
from ..names import MEMORY_AVAILABLE, WORKERS_USS, worker_uss_gauge

_MB = 1024 * 1024


class SourceUnavailable(Exception):
    """A source cannot run here; the message says why and what would enable it.

    ``expected`` marks the ordinary case of a machine without the hardware (no NVIDIA driver at
    all, no CUDA device): the sampler then says so at DEBUG, not on every CPU run's console.
    """

    def __init__(self, message: str, *, expected: bool = False) -> None:
        super().__init__(message)
        self.expected = expected


class Source(Protocol):
    """Anything the sampler can poll."""

    name: str

    def open(self) -> None: ...
    def sample(self, warn: WarnOnce) -> dict[str, float]: ...
    def close(self) -> None: ...


def _import(module: str, extra: str) -> ModuleType:
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise SourceUnavailable(f"{module} is not installed (pip install 'perfkit[{extra}]')") from exc


class NvmlSource:
    """Per GPU: memory used and total, GPU and memory utilisation, and this process's GPU memory.

    Devices are those in ``CUDA_VISIBLE_DEVICES`` when it lists indexes, else all of them.
    """

    name = "nvml"

    def __init__(self, nvml: ModuleType | None = None, *, pid: int | None = None) -> None:
        self._module = nvml
        self._nvml: Any = None
        self._pid = pid or os.getpid()
        self._handles: list[tuple[int, Any]] = []

    def open(self) -> None:
        nvml: Any = self._module or _import("pynvml", "nvml")
        try:
            nvml.nvmlInit()
            count = nvml.nvmlDeviceGetCount()
            indexes = _visible(count)
            self._handles = [(i, nvml.nvmlDeviceGetHandleByIndex(i)) for i in indexes]
        except Exception as exc:  # NVMLError_LibraryNotFound, _DriverNotLoaded, ...
            # No NVIDIA library or driver at all is a machine without an NVIDIA GPU, not a fault.
            absent = type(exc).__name__ in ("NVMLError_LibraryNotFound", "NVMLError_DriverNotLoaded")
            raise SourceUnavailable(
                f"NVML could not start: {exc!r} (no NVIDIA driver?)", expected=absent
            ) from exc
        if not self._handles:
            raise SourceUnavailable("NVML reports no GPU")
        self._nvml = nvml

    def sample(self, warn: WarnOnce) -> dict[str, float]:
        nvml, out = self._nvml, {}
        for i, handle in self._handles:
            try:
                mem = nvml.nvmlDeviceGetMemoryInfo(handle)
                out[f"gpu{i}.memory_used_mb"] = mem.used / _MB
                out[f"gpu{i}.memory_total_mb"] = mem.total / _MB
            except Exception as exc:
                warn(f"nvml.memory:{type(exc).__name__}", f"perfkit: NVML memory of GPU {i} failed: {exc!r}")
            try:
                util = nvml.nvmlDeviceGetUtilizationRates(handle)
                out[f"gpu{i}.util_percent"] = float(util.gpu)
                out[f"gpu{i}.memory_util_percent"] = float(util.memory)
            except Exception as exc:
                warn(
                    f"nvml.util:{type(exc).__name__}", f"perfkit: NVML utilisation of GPU {i} failed: {exc!r}"
                )
            try:
                procs = nvml.nvmlDeviceGetComputeRunningProcesses(handle)
                mine = [p.usedGpuMemory for p in procs if p.pid == self._pid and p.usedGpuMemory is not None]
                if mine:  # the driver reports nothing per process in some containers
                    out[f"gpu{i}.process_memory_mb"] = sum(mine) / _MB
            except Exception as exc:
                warn(
                    f"nvml.procs:{type(exc).__name__}", f"perfkit: NVML processes of GPU {i} failed: {exc!r}"
                )
        return out

    def close(self) -> None:
        if self._nvml is not None:
            with contextlib.suppress(Exception):  # shutting down a monitor must not raise into user code
                self._nvml.nvmlShutdown()
            self._nvml = None


def _visible(count: int) -> list[int]:
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible:
        try:
            return [i for i in (int(x) for x in visible.split(",") if x.strip()) if 0 <= i < count]
        except ValueError:  # UUIDs: NVML's order cannot be matched cheaply, show every device
            pass
    return list(range(count))


class ProcessSource:
    """This process's RSS and CPU %, its children's memory (DataLoader workers) summed and per child,
    and the system's memory %.

    A forked worker's RSS counts every page it shares with the main process (one measured here:
    RSS 190 MB, PSS 72 MB, USS 11 MB), so summing the workers' RSS overstates what they cost. The
    workers' USS (the pages only that worker has) and PSS (its pages, shared ones divided among the
    processes sharing them) are read too, every ``full_s`` (about 150 µs per worker: too dear
    for every sample), beside their RSS: ``workers.uss_mb``, ``workers.pss_mb``, ``workers.rss_mb``.
    A worker is left out of them until it has run ``full_s``: reading them walks its page tables
    under its memory map's lock, which a worker just forked from a large process holds up (25 ms
    a read measured on this project's VM under load, up to 100 ms), so a read in a worker's first
    moments delayed its start, and each epoch's first batch, when workers are not persistent.
    """

    name = "process"

    def __init__(
        self,
        psutil: ModuleType | None = None,
        *,
        pid: int | None = None,
        relist_s: float = 0.0,
        full_s: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._module = psutil
        self._clock = clock
        self._pid = pid
        self._ps: Any = None
        self._proc: Any = None
        self._children: dict[int, Any] = {}
        self._seen: dict[int, float] = {}  # when each child was first listed (monotonic)
        # Listing children reads a file per thread of this process (about 25 µs with torch's
        # threads): every sample by default, so workers started for a new epoch show at once.
        self._relist_s = relist_s
        self._listed_at = -1e18
        self._full_s = full_s
        self._full_at = -1e18

    def open(self) -> None:
        ps: Any = self._module or _import("psutil", "system")
        self._proc = ps.Process(self._pid)
        self._proc.cpu_percent(None)  # the first reading is always 0: prime it
        self._ps = ps

    def sample(self, warn: WarnOnce) -> dict[str, float]:
        ps, proc = self._ps, self._proc
        system = ps.virtual_memory()
        out = {
            "process.rss_mb": proc.memory_info().rss / _MB,
            "process.cpu_percent": proc.cpu_percent(None),
            "system.memory_percent": system.percent,
            # what the process could still grow into: MEMORY_GROWTH's projection reads its least
            MEMORY_AVAILABLE: system.available / _MB,
        }
        total = 0.0
        alive = 0
        for child in self._current_children(warn):
            try:
                rss = child.memory_info().rss / _MB
            except ps.NoSuchProcess:  # exited between listing and reading
                continue
            except ps.AccessDenied as exc:
                warn("process.child:AccessDenied", f"perfkit: cannot read a child's memory: {exc!r}")
                continue
            out[f"worker{alive}.rss_mb"] = rss
            total += rss
            alive += 1
        out["workers.rss_mb"] = total
        out["workers.count"] = float(alive)
        now = self._clock()
        if alive and now - self._full_at >= self._full_s:
            self._full_at = now
            out.update(self._unique_memory(warn))
        return out

    def _unique_memory(self, warn: WarnOnce) -> dict[str, float]:
        """The children's USS and PSS (where the platform has them), summed and per child."""
        ps = self._ps
        out: dict[str, float] = {}
        uss = pss = 0.0
        settled = self._clock() - self._full_s
        for i, child in enumerate(self._children[pid] for pid in sorted(self._children)):
            if self._seen.get(child.pid, settled) > settled:  # still starting: its USS another time
                continue
            try:
                full = child.memory_full_info()
            except (ps.NoSuchProcess, ps.AccessDenied):
                continue
            except Exception as exc:  # a platform without it: RSS stays
                warn(f"process.full:{type(exc).__name__}", f"perfkit: cannot read a child's USS: {exc!r}")
                return {}
            out[worker_uss_gauge(i)] = full.uss / _MB
            uss += full.uss / _MB
            pss += getattr(full, "pss", 0) / _MB
        if not out:  # every worker still starting
            return {}
        out[WORKERS_USS] = uss
        if pss:
            out["workers.pss_mb"] = pss
        return out

    def _current_children(self, warn: WarnOnce) -> list[Any]:
        ps = self._ps
        now = self._clock()
        if now - self._listed_at < self._relist_s:
            return [self._children[pid] for pid in sorted(self._children)]
        self._listed_at = now
        try:
            pids = _proc_children(self._proc.pid)
            if pids is None:  # not Linux: psutil scans every process of the machine (about 1.5 ms)
                pids = [p.pid for p in self._proc.children()]
        except ps.Error as exc:
            warn(f"process.children:{type(exc).__name__}", f"perfkit: cannot list child processes: {exc!r}")
            return []
        children = {}
        for pid in pids:
            child = self._children.get(pid)
            if child is None:
                try:
                    child = ps.Process(pid)
                except ps.NoSuchProcess:
                    continue
                self._seen[pid] = now
            children[pid] = child
        # Keep psutil.Process objects between samples: they notice pid reuse and cost less.
        self._children = children
        self._seen = {pid: self._seen[pid] for pid in children}
        return [children[pid] for pid in sorted(children)]

    def close(self) -> None:
        self._children = {}
        self._seen = {}


def _proc_children(pid: int) -> list[int] | None:
    """Direct children of ``pid`` from /proc/PID/task/TID/children, or None where there is none.

    DataLoader workers are direct children; a file per thread is read (a few µs each).
    """
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except FileNotFoundError:
        return None
    found: list[int] = []
    for i, tid in enumerate(tids):
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as fh:
                found += [int(x) for x in fh.read().split()]
        except FileNotFoundError:
            if i == 0 and not found:
                return None  # a kernel without CONFIG_PROC_CHILDREN (or the thread just exited)
    return found


class TorchCudaSource:
    """Per CUDA device: allocated and reserved memory, and the allocator's peak since the last sample.

    The peak is reset after each reading, so the largest ``peak_allocated_mb`` sample of a window is
    that window's peak, whatever other windows overlap it. Only when torch is already imported.

    Until torch has initialised CUDA in this process (``torch.cuda.is_initialized()``: the first
    tensor on a device, or any call that needs the driver) a sample is empty: the caching
    allocator does not exist yet, ``reset_peak_memory_stats`` raises ``RuntimeError('Invalid
    device argument ...')`` (seen on an H200, torch 2.11), and nothing has been allocated. The
    sampler's thread must not be the one to initialise CUDA either, so nothing here asks for it.
    """

    name = "torch_cuda"

    def __init__(self, torch: ModuleType | None = None) -> None:
        self._module = torch
        self._torch: Any = None
        self._devices: list[int] = []

    def open(self) -> None:
        torch: Any = self._module or sys.modules.get("torch")
        if torch is None:
            raise SourceUnavailable("torch is not imported in this process", expected=True)
        if not torch.cuda.is_available():
            raise SourceUnavailable("torch sees no CUDA device", expected=True)
        self._devices = list(range(torch.cuda.device_count()))
        self._torch = torch

    def sample(self, warn: WarnOnce) -> dict[str, float]:
        cuda = self._torch.cuda
        out: dict[str, float] = {}
        if not cuda.is_initialized():
            return out
        for i in self._devices:
            try:
                out[f"cuda{i}.allocated_mb"] = cuda.memory_allocated(i) / _MB
                out[f"cuda{i}.reserved_mb"] = cuda.memory_reserved(i) / _MB
                out[f"cuda{i}.peak_allocated_mb"] = cuda.max_memory_allocated(i) / _MB
                cuda.reset_peak_memory_stats(i)
            except Exception as exc:
                warn(
                    f"torch_cuda:{type(exc).__name__}",
                    f"perfkit: torch.cuda memory of device {i} failed: {exc!r}",
                )
        return out

    def close(self) -> None:
        self._torch = None


def default_sources() -> list[Source]:
    return [NvmlSource(), ProcessSource(), TorchCudaSource()]


SOURCES: dict[str, type[NvmlSource] | type[ProcessSource] | type[TorchCudaSource]] = {
    "nvml": NvmlSource,
    "process": ProcessSource,
    "torch_cuda": TorchCudaSource,
}
