"""On a real NVIDIA GPU (NCCL, a group of one): each collective's wait is the waiting stream's, timed by
two events on it, and nothing synchronizes while the step runs (CUDA's sync debug mode set to "error").

FSDP2's way is planted by hand: a long kernel and then a synchronous all-gather on a stream of its
own, and the computing stream waiting for the event recorded after it; the truth is the test's own
event on the computing stream just before that wait, against the side stream's event.

Skipped without CUDA. Run them on a GPU machine with ``pytest tests/gpu -m gpu``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import perfkit
import perfkit.torch

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]
SPIN_CYCLES = 40_000_000  # about 20 ms of one SM's clock: the side stream's work still to come


class Recorder:
    def __init__(self) -> None:
        self.registry = perfkit.Registry()
        self.part = "forward"

    def part_now(self) -> str:
        return self.part


@pytest.fixture
def nccl(tmp_path: Path) -> Iterator[None]:
    torch.cuda.set_device(0)
    dist.init_process_group("nccl", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    try:
        yield
    finally:
        dist.destroy_process_group()


@pytest.mark.usefixtures("nccl")
def test_waits_are_the_waiting_streams_between_two_events_and_nothing_synchronizes() -> None:
    x = torch.ones(1 << 20, device="cuda")
    out = torch.empty(1 << 20, device="cuda")
    dist.all_reduce(x)  # the communicator is made at the first call, which may synchronize
    dist.all_gather_into_tensor(out, x)
    torch.cuda.synchronize()
    rec = Recorder()
    side = torch.cuda.Stream()
    done, before = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    stop = perfkit.torch.time_collectives(rec)
    torch.cuda.set_sync_debug_mode("error")
    try:
        dist.all_reduce(x)  # synchronous, on the computing stream
        dist.all_reduce(x, async_op=True).wait()  # asynchronous: its wait() on the computing stream
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            torch.cuda._sleep(SPIN_CYCLES)
            dist.all_gather_into_tensor(out, x)  # holds only the side stream
            side.record_event(done)
        before.record()  # where the computing stream is when it starts to wait
        rec.part = "backward"
        torch.cuda.current_stream().wait_event(done)
    finally:
        torch.cuda.set_sync_debug_mode(0)
        stop()
    torch.cuda.synchronize()
    snap = rec.registry.snapshot()
    assert snap["dist.wait.forward.all_reduce"].count == 2
    truth_s = before.elapsed_time(done) / 1e3
    assert truth_s > 0.005  # the computing stream did stand still
    assert snap["dist.wait.backward.all_gather"].total_s == pytest.approx(truth_s, rel=0.1, abs=0.0005)
    assert snap.gauges["dist.bytes.all_gather"].mean == out.numel() * out.element_size()
