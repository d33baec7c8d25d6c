"""cuda=True: GPU time from events resolved lazily, through the registry's ``gpu_events`` seam."""

from __future__ import annotations

import warnings

import pytest

import perfkit
from perfkit import PerfkitWarning, Registry
from perfkit import _gpu_events as gpu_events

from .conftest import FakeClock


class FakeGpu:
    """A stream whose kernels finish only when told to; events are stamped with its clock."""

    def __init__(self) -> None:
        self.now_ms = 0.0
        self.done_until = -1.0
        self.synchronized = 0

    def event(self) -> FakeEvent:
        return FakeEvent(self)


class FakeEvent:
    def __init__(self, gpu: FakeGpu) -> None:
        self.gpu, self.at_ms = gpu, -1.0

    def record(self) -> None:
        self.at_ms = self.gpu.now_ms

    def query(self) -> bool:
        return self.at_ms <= self.gpu.done_until

    def synchronize(self) -> None:
        self.gpu.synchronized += 1
        self.gpu.done_until = max(self.gpu.done_until, self.at_ms)

    def elapsed_time(self, end: FakeEvent) -> float:
        assert self.query(), "elapsed_time from an event that has not completed"
        assert end.query(), "elapsed_time to an event that has not completed"
        return end.at_ms - self.at_ms


@pytest.fixture
def gpu() -> FakeGpu:
    return FakeGpu()


@pytest.fixture
def cuda_reg(clock: FakeClock, gpu: FakeGpu) -> Registry:
    return Registry(clock=clock, gpu_events=gpu.event)


def test_section_records_host_time_and_gpu_time(cuda_reg: Registry, clock: FakeClock, gpu: FakeGpu) -> None:
    with perfkit.section("matmul", registry=cuda_reg, cuda=True):
        clock.advance(50_000)  # the host only queues the kernels: 50 µs
        gpu.now_ms += 4.0  # the GPU runs them for 4 ms
    snap = cuda_reg.snapshot()
    assert snap["matmul"].total_s == pytest.approx(50e-6)
    assert snap["matmul.gpu"].total_s == pytest.approx(4e-3)
    assert ("matmul",) in snap.tree
    assert not any("matmul.gpu" in path for path in snap.tree)  # overlaps the host time


def test_no_synchronisation_per_block_only_when_a_snapshot_needs_the_numbers(
    cuda_reg: Registry, gpu: FakeGpu
) -> None:
    for _ in range(100):
        with perfkit.section("step", registry=cuda_reg, cuda=True):
            gpu.now_ms += 1.0
    cuda_reg.drain()  # a drain only takes what has completed
    assert gpu.synchronized == 0
    assert cuda_reg._gpu.items, "nothing has completed yet"
    assert cuda_reg.snapshot()["step.gpu"].count == 100
    assert gpu.synchronized == 100


def test_completed_events_are_resolved_at_drain_without_waiting(cuda_reg: Registry, gpu: FakeGpu) -> None:
    for _ in range(3):
        with perfkit.section("k", registry=cuda_reg, cuda=True):
            gpu.now_ms += 2.0
    gpu.done_until = gpu.now_ms  # the stream caught up on its own
    cuda_reg.drain()
    assert cuda_reg._gpu.items == []
    assert cuda_reg.snapshot()["k.gpu"].total_s == pytest.approx(6e-3)
    assert gpu.synchronized == 0


def test_timed_cuda_records_both_and_flags_errors(cuda_reg: Registry, gpu: FakeGpu) -> None:
    @perfkit.timed("forward", registry=cuda_reg, cuda=True)
    def forward(fail: bool) -> None:
        gpu.now_ms += 3.0
        if fail:
            raise RuntimeError("CUDA out of memory")

    forward(False)
    with pytest.raises(RuntimeError, match="out of memory"):
        forward(True)
    snap = cuda_reg.snapshot()
    assert (snap["forward"].count, snap["forward"].errors) == (2, 1)
    assert (snap["forward.gpu"].total_s, snap["forward.gpu"].errors) == (pytest.approx(6e-3), 1)


def test_without_cuda_it_times_wall_clock_and_says_so_once(reg: Registry, clock: FakeClock) -> None:
    gpu_events.fallback_warning.counts.clear()
    with pytest.warns(PerfkitWarning, match="cuda=True but CUDA is not available") as seen:
        for _ in range(3):
            with perfkit.section("fwd", registry=reg, cuda=True):
                clock.advance(10)
    assert len(seen) == 1
    snap = reg.snapshot()
    assert (snap["fwd"].count, "fwd.gpu" in snap) == (3, False)


def test_timed_cuda_without_cuda_falls_back_too(reg: Registry) -> None:
    @perfkit.timed("f", registry=reg, cuda=True)
    def f() -> int:
        return 1

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PerfkitWarning)
        assert f() == 1
    assert reg.snapshot()["f"].count == 1


def test_cuda_times_plain_functions_only() -> None:
    async def coro() -> None:
        pass

    with pytest.raises(ValueError, match="cuda=True times plain functions"):
        perfkit.timed(cuda=True)(coro)


def test_gpu_events_must_be_callable() -> None:
    with pytest.raises(TypeError, match="gpu_events must be a callable"):
        Registry(gpu_events=3)  # type: ignore[arg-type]


def test_section_as_a_decorator_keeps_the_gpu_time(
    cuda_reg: Registry, clock: FakeClock, gpu: FakeGpu
) -> None:
    @perfkit.section("matmul", registry=cuda_reg, cuda=True)
    def matmul() -> None:
        clock.advance(20_000)
        gpu.now_ms += 3.0

    matmul()
    matmul()
    snap = cuda_reg.snapshot()
    assert snap["matmul"].count == 2
    assert snap["matmul.gpu"].total_s == pytest.approx(6e-3)
