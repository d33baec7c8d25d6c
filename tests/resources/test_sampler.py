"""ResourceSampler: a daemon thread polling sources into gauges, that survives faults and forks."""

from __future__ import annotations

import logging
import multiprocessing as mp
import threading
import time
from types import SimpleNamespace
from typing import Any

import pytest

import perfkit
from perfkit import PerfkitWarning, Registry, ResourceSampler
from perfkit._warn import WarnOnce
from tests.conftest import FakeClock
from tests.processes import Family


class Counter:
    """A source that counts its samples (and can be told to fail)."""

    name = "counter"

    def __init__(self, fail_with: Exception | None = None) -> None:
        self.n = 0
        self.fail_with = fail_with
        self.opened = self.closed = 0

    def open(self) -> None:
        self.opened += 1

    def sample(self, warn: WarnOnce) -> dict[str, float]:
        self.n += 1
        if self.fail_with is not None:
            raise self.fail_with
        return {"counter.value": float(self.n)}

    def close(self) -> None:
        self.closed += 1


def sampler_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "perfkit-sampler"]


def test_samples_into_gauges_of_the_registry(reg: Registry, clock: FakeClock) -> None:
    sampler = ResourceSampler(60, registry=reg, sources=[Counter()])
    with sampler:
        clock.advance(1_000_000_000)
        sampler.sample_now()
    g = reg.snapshot().gauges["counter.value"]
    assert (g.count, g.min, g.max, g.last) == (3, 1.0, 3.0, 3.0)  # at start, by hand, at stop
    assert g.mean == pytest.approx(2.0)


def test_a_window_of_gauges_lines_up_with_the_timings_of_the_same_window(
    reg: Registry, clock: FakeClock
) -> None:
    counter = Counter()
    sampler = ResourceSampler(60, registry=reg, sources=[counter]).start()
    start = reg.cursor()
    clock.advance(2_000_000_000)
    with perfkit.section("epoch", registry=reg):
        sampler.sample_now()
    window = reg.snapshot(since=start)
    sampler.stop()
    g = window.gauges["counter.value"]
    assert (g.count, g.max, g.peak_at_s) == (1, 2.0, 2.0)
    assert window["epoch"].count == 1


def test_start_and_stop_are_idempotent_and_leave_no_thread(reg: Registry) -> None:
    counter = Counter()
    sampler = ResourceSampler(60, registry=reg, sources=[counter])
    sampler.start()
    sampler.start()
    assert sampler.running
    assert len(sampler_threads()) == 1
    sampler.stop()
    sampler.stop()
    assert not sampler.running
    assert sampler_threads() == []
    assert counter.opened == counter.closed == 1


def test_stop_returns_without_waiting_out_a_long_interval(reg: Registry) -> None:
    sampler = ResourceSampler(300, registry=reg, sources=[Counter()]).start()
    t0 = time.monotonic()
    sampler.stop()
    assert time.monotonic() - t0 < 5  # it waits on an Event, not a 300 s sleep


def test_a_failing_source_is_warned_about_once_and_the_others_go_on(reg: Registry) -> None:
    good, bad = Counter(), Counter(fail_with=RuntimeError("driver gone"))
    bad.name = "bad"
    sampler = ResourceSampler(60, registry=reg, sources=[bad, good])
    with pytest.warns(PerfkitWarning, match="source 'bad' failed: RuntimeError") as seen, sampler:
        for _ in range(5):
            sampler.sample_now()
    assert len([w for w in seen if "bad" in str(w.message)]) == 1
    assert reg.snapshot().gauges["counter.value"].count == good.n


def test_unavailable_sources_are_skipped_with_one_log_line(
    reg: Registry, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="perfkit")
    sampler = ResourceSampler(60, registry=reg, sources=["torch_cuda", Counter()])
    with sampler:
        pass
    assert sampler.sources == ["counter"]
    (line,) = [r for r in caplog.records if "torch_cuda" in r.getMessage()]
    assert "is off" in line.getMessage()
    assert line.levelno == logging.DEBUG  # no CUDA device here: the ordinary case, not news


@pytest.mark.parametrize("bad", [0, -1, "fast", True, float("inf"), float("nan"), 1e9])
def test_interval_must_be_a_finite_positive_number_up_to_an_hour(bad: object) -> None:
    with pytest.raises(
        ValueError, match=rf"interval_s must be a finite number in \(0.0, 3600\], got {bad!r}"
    ):
        ResourceSampler(bad)  # type: ignore[arg-type]


def test_sources_are_checked_at_construction() -> None:
    with pytest.raises(ValueError, match="unknown source 'gpu'"):
        ResourceSampler(sources=["gpu"])
    with pytest.raises(TypeError, match="sources must be a list"):
        ResourceSampler(sources="process")
    with pytest.raises(TypeError, match="neither a source name nor"):
        ResourceSampler(sources=[object()])  # type: ignore[list-item]


def test_the_default_sources_run_here_and_measure_this_process(reg: Registry) -> None:
    with ResourceSampler(0.05, registry=reg) as sampler:
        sampler.sample_now()
    assert "process" in sampler.sources
    assert reg.snapshot().gauges["process.rss_mb"].max > 10
    assert sampler.cpu_time_s > 0


def _child_sees_a_clean_sampler(sampler: ResourceSampler, queue: Any) -> None:
    was_running = sampler.running
    sampler.start()  # would deadlock on a lock held by the parent's sampler thread
    sampler.sample_now()
    sampler.stop()
    queue.put(
        (was_running, sampler.samples > 0, perfkit.get_registry().snapshot().gauges.get("counter.value"))
    )


@pytest.mark.skipif("fork" not in mp.get_all_start_methods(), reason="needs fork")
def test_a_forked_child_inherits_no_running_sampler_and_no_held_lock() -> None:
    sampler = ResourceSampler(0.001, sources=[Counter()]).start()  # sampling all the time: locks often held
    try:
        ctx = mp.get_context("fork")
        for _ in range(3):
            queue = ctx.Queue()
            child = ctx.Process(target=_child_sees_a_clean_sampler, args=(sampler, queue))
            child.start()
            was_running, sampled, _ = queue.get(timeout=30)
            child.join(timeout=30)
            assert child.exitcode == 0
            assert (was_running, sampled) == (False, True)
    finally:
        sampler.stop()


def test_real_child_processes_are_measured_and_one_that_exits_is_skipped(reg: Registry) -> None:
    family = Family(2)
    try:
        source = perfkit.resources.ProcessSource(pid=family.parent.pid, relist_s=0)
        sampler = ResourceSampler(60, registry=reg, sources=[source]).start()
        sampler.sample_now()
        family.kill(family.children[0])
        sampler.sample_now()
        sampler.stop()
    finally:
        family.close()
    counts = reg.snapshot().gauge_data("workers.count").values.tolist()
    assert counts[:2] == [2.0, 2.0]  # at start, and by hand
    assert counts[2:] == [1.0, 1.0]  # after the kill, and at stop


def _fake_nvml(fail_util: bool = False) -> SimpleNamespace:
    class NVMLError(Exception):
        pass

    def util(handle: int) -> SimpleNamespace:
        if fail_util:
            raise NVMLError("Not Supported")
        return SimpleNamespace(gpu=87, memory=40)

    mib = 1024 * 1024
    return SimpleNamespace(
        NVMLError=NVMLError,
        nvmlInit=lambda: None,
        nvmlShutdown=lambda: None,
        nvmlDeviceGetCount=lambda: 2,
        nvmlDeviceGetHandleByIndex=lambda i: i,
        nvmlDeviceGetMemoryInfo=lambda h: SimpleNamespace(used=(h + 1) * 1000 * mib, total=80_000 * mib),
        nvmlDeviceGetUtilizationRates=util,
        nvmlDeviceGetComputeRunningProcesses=lambda h: [SimpleNamespace(pid=4242, usedGpuMemory=512 * mib)],
    )


def test_sampler_runs_a_fake_nvml_through_the_module_seam(reg: Registry) -> None:
    source = perfkit.resources.NvmlSource(_fake_nvml(), pid=4242)  # type: ignore[arg-type]
    with ResourceSampler(60, registry=reg, sources=[source]):
        pass
    gauges = reg.snapshot().gauges
    assert gauges["gpu1.memory_used_mb"].last == 2000.0
    assert gauges["gpu0.util_percent"].last == 87.0
    assert gauges["gpu0.process_memory_mb"].last == 512.0
