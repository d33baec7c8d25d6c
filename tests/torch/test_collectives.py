"""time_collectives in one process (a gloo group of one): each wait is recorded where the rank was held
(the synchronous call, ``Work.wait()``; on a device, the waiting stream's events), in the step part the
consumer is in then, with the bytes of each call; perfkit's own collectives and DDP's are not.

The collectives run for real; how long they take is planted on a fake clock by a wrapper installed
beneath perfkit's (the test's own clock around the call), so every figure is exact.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import torch.distributed as dist

import perfkit
import perfkit.torch
from perfkit.names import COLLECTIVES
from perfkit.torch._collectives import ENTRY_POINTS, untimed
from perfkit.torch._streams import Streams
from tests.conftest import FakeClock
from tests.test_cuda_timing import FakeGpu


class Recorder:
    """A consumer: its registry, and the part the test says the step is in."""

    def __init__(self, clock: FakeClock, gpu: FakeGpu | None = None) -> None:
        self.registry = perfkit.Registry(clock=clock, gpu_events=gpu.event if gpu else None)
        self.part = "forward"

    def part_now(self) -> str:
        return self.part


@pytest.fixture
def group(tmp_path: Path) -> Iterator[None]:
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    try:
        yield
    finally:
        dist.destroy_process_group()


def planted(monkeypatch: pytest.MonkeyPatch, owner: Any, name: str, advance: Any) -> None:
    """``owner.name`` calls ``advance()`` (the collective's time on the test's clock) and then itself."""
    original = getattr(owner, name)

    def call(*args: Any, **kwargs: Any) -> Any:
        advance()
        return original(*args, **kwargs)

    monkeypatch.setattr(owner, name, call)


def waits(rec: Recorder) -> dict[str, tuple[int, float]]:
    snap = rec.registry.snapshot()
    return {n: (snap[n].count, round(snap[n].total_s, 6)) for n in snap if n.startswith("dist.wait.")}


def test_every_entry_point_is_torchs_and_every_collective_is_named() -> None:
    assert all(callable(getattr(dist, name, None)) for name in ENTRY_POINTS)
    assert set(ENTRY_POINTS.values()) == set(COLLECTIVES)
    # FSDP2 (fully_shard) calls these two, by the namespace, at every call
    assert ENTRY_POINTS["all_gather_single"] == "all_gather"
    assert ENTRY_POINTS["reduce_scatter_single"] == "reduce_scatter"


@pytest.mark.usefixtures("group")
def test_a_synchronous_call_is_its_wait_and_an_asynchronous_ones_wait_is_its_work_wait(
    monkeypatch: pytest.MonkeyPatch, clock: FakeClock
) -> None:
    planted(monkeypatch, dist, "all_reduce", lambda: clock.advance(3_000_000))
    rec = Recorder(clock)
    # the all-gather's work is still running when backward waits for it: 5 ms left then
    planted(
        monkeypatch,
        dist.distributed_c10d.Work,
        "wait",
        lambda: clock.advance(5_000_000 * (rec.part == "backward")),
    )
    stop = perfkit.torch.time_collectives(rec)
    try:
        dist.all_reduce(torch.ones(256))  # synchronous, in forward: 3 ms
        out = torch.empty(64)
        work = dist.all_gather_single(out, torch.ones(64), async_op=True)  # launched in forward...
        rec.part = "backward"
        clock.advance(7_000_000)  # ... compute overlaps it ...
        work.wait()  # ... and the rank waits in backward: 5 ms
        work.wait()  # waited for already: no second wait
        never = dist.broadcast(torch.ones(8), 0, async_op=True)  # never waited for: no wait at all
        del never
    finally:
        stop()
    assert waits(rec) == {
        "dist.wait.forward.all_reduce": (1, 0.003),
        "dist.wait.backward.all_gather": (1, 0.005),
    }
    bytes_of = {n: (g.count, g.mean) for n, g in rec.registry.snapshot().gauges.items()}
    assert bytes_of == {
        "dist.bytes.all_reduce": (1, 1024.0),  # the tensor
        "dist.bytes.all_gather": (1, 256.0),  # the output, the largest argument
        "dist.bytes.broadcast": (1, 32.0),  # every call's bytes, waited for or not
    }


@pytest.mark.usefixtures("group")
def test_perfkits_own_collectives_and_a_switched_off_perfkit_are_not_timed(
    monkeypatch: pytest.MonkeyPatch, clock: FakeClock
) -> None:
    rec = Recorder(clock)
    stop = perfkit.torch.time_collectives(rec)
    try:
        assert untimed(dist.all_reduce) is not dist.all_reduce  # the original, as the merge calls it
        untimed(dist.all_reduce)(torch.ones(4))
        untimed(dist.all_gather)([torch.empty(4)], torch.ones(4), async_op=True).wait()
        perfkit.torch.gather_ranks.all_gather_ints(np.ones(3, dtype=np.int64))
        perfkit.disable()
        try:
            dist.all_reduce(torch.ones(4))
        finally:
            perfkit.enable()
    finally:
        stop()
    assert waits(rec) == {}
    assert not rec.registry.snapshot().gauges


@pytest.mark.usefixtures("group")
def test_the_wrappers_go_with_the_last_consumer(clock: FakeClock) -> None:
    original, wait = dist.all_reduce, dist.distributed_c10d.Work.wait
    first, second = Recorder(clock), Recorder(clock)
    stop_first = perfkit.torch.time_collectives(first)
    stop_second = perfkit.torch.time_collectives(second)
    dist.all_reduce(torch.ones(4))
    stop_first()
    assert dist.all_reduce is not original  # the second still times
    stop_second()
    assert (dist.all_reduce, dist.distributed_c10d.Work.wait) == (original, wait)
    assert list(waits(first)) == list(waits(second)) == ["dist.wait.forward.all_reduce"]
    with pytest.raises(TypeError, match="registry and part_now"):
        perfkit.torch.time_collectives(object())  # type: ignore[arg-type]


class FakeStream:
    """A CUDA stream as FSDP2 uses it: events recorded on it, waits for another stream's events."""

    def __init__(self, gpu: FakeGpu, name: str) -> None:
        self.gpu, self.name = gpu, name

    def record_event(self, event: Any = None) -> Any:
        event = event or self.gpu.event()
        event.record()
        return event

    def wait_event(self, event: Any) -> None:
        self.gpu.now_ms = max(self.gpu.now_ms, event.at_ms)  # the stream stands still until it


class FakeCuda:
    """``torch.cuda`` at the seam: a default stream, a side one (FSDP2's all-gather stream)."""

    Stream = FakeStream

    def __init__(self, gpu: FakeGpu) -> None:
        self.default = FakeStream(gpu, "default")
        self.side = FakeStream(gpu, "all_gather")
        self.current = self.default

    def current_stream(self) -> FakeStream:
        return self.current

    def default_stream(self) -> FakeStream:
        return self.default


class OnDevice(Streams):
    """Every tensor on the device: the CPU's tensors run the real collectives, the fake GPU's clock
    says how long the waiting stream stood still."""

    def holds(self, tensor: Any) -> bool:
        return True


@pytest.mark.usefixtures("group")
def test_on_a_device_the_wait_is_the_waiting_streams_between_two_events_and_nothing_synchronizes(
    monkeypatch: pytest.MonkeyPatch, clock: FakeClock
) -> None:
    gpu = FakeGpu()
    cuda = FakeCuda(gpu)
    rec = Recorder(clock, gpu)
    record_event, wait_event = FakeStream.record_event, FakeStream.wait_event
    planted(monkeypatch, dist, "all_reduce", lambda: setattr(gpu, "now_ms", gpu.now_ms + 2.0))
    stop = perfkit.torch.time_collectives(rec, streams=OnDevice(cuda))
    try:
        dist.all_reduce(torch.ones(4))  # synchronous, on the stream that computes: it stands 2 ms
        # FSDP2's way: the all-gather on its own stream, which finishes 6 ms later; the computing
        # stream, 1 ms of its own work after the call, waits for the side stream's event
        cuda.current = cuda.side
        out = torch.empty(4)
        dist.all_gather_single(out, torch.ones(4))
        gpu.now_ms += 6.0
        done = cuda.side.record_event()
        cuda.current = cuda.default
        gpu.now_ms -= 5.0  # the computing stream's own clock: 1 ms past the call
        rec.part = "forward"
        cuda.default.wait_event(done)  # stands still 5 ms: the next layer's all-gather
        untagged = cuda.default.record_event()
        cuda.default.wait_event(untagged)  # an event no collective made: not a wait of one
        assert gpu.synchronized == 0  # nothing synchronizes while the step runs
    finally:
        stop()
    gpu.done_until = gpu.now_ms  # the GPU caught up: the events resolve at the next drain
    assert waits(rec) == {
        "dist.wait.forward.all_reduce": (1, 0.002),
        "dist.wait.forward.all_gather": (1, 0.005),
    }
    assert (FakeStream.record_event, FakeStream.wait_event) == (record_event, wait_event)  # undone
