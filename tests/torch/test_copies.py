"""time_copy / to_device: a batch's copy to the device, its host and stream time, its bytes; the advice.

CUDA events are faked at the registry's seam (``Registry(gpu_events=...)``); pinned memory needs a
device, so the pinned bytes of real batches are checked in tests/gpu and the GPU check.
"""

from __future__ import annotations

from collections import namedtuple
from dataclasses import dataclass

import pytest

torch = pytest.importorskip("torch")

import perfkit  # noqa: E402
import perfkit.torch  # noqa: E402
from perfkit.resources import Copies, copy_advice, copy_stats  # noqa: E402


class Stream:
    """A stream on which the copy takes ``copy_ms``; its events complete at once."""

    def __init__(self, copy_ms: float) -> None:
        self.now_ms, self.copy_ms = 0.0, copy_ms

    def event(self) -> Event:
        return Event(self)


class Event:
    def __init__(self, stream: Stream) -> None:
        self.stream, self.at_ms = stream, 0.0

    def record(self) -> None:
        self.at_ms = self.stream.now_ms
        self.stream.now_ms += self.stream.copy_ms  # the copy queued after the start event

    def query(self) -> bool:
        return True

    def synchronize(self) -> None:
        pass

    def elapsed_time(self, end: Event) -> float:
        return end.at_ms - self.at_ms


Pair = namedtuple("Pair", "image label")


@dataclass
class Sample:
    pixels: torch.Tensor
    name: str


def test_a_copy_records_host_time_stream_time_and_bytes() -> None:
    reg = perfkit.Registry(gpu_events=Stream(copy_ms=3.5).event)
    batch = {"x": torch.zeros(100, 100), "meta": Sample(torch.zeros(10, dtype=torch.int64), "a")}
    for _ in range(4):
        with perfkit.torch.time_copy(batch, registry=reg):
            pass
    snap = reg.snapshot()
    found = copy_stats(snap)
    assert found is not None
    assert found.count == 4
    assert found.gpu_s == pytest.approx(4 * 0.0035)
    assert found.bytes == 4 * (100 * 100 * 4 + 10 * 8)
    assert found.pinned_bytes == 0
    assert ("h2d.copy",) in snap.tree
    assert ("h2d.copy.gpu",) not in snap.tree  # the stream's time overlays the host's


def test_a_copy_that_raises_is_an_error_record() -> None:
    reg = perfkit.Registry()
    with pytest.raises(RuntimeError), perfkit.torch.time_copy(torch.zeros(3), registry=reg):
        raise RuntimeError("out of memory")
    assert reg.snapshot()["h2d.copy"].errors == 1


def test_to_device_keeps_the_batch_shape_and_times_one_copy() -> None:
    reg = perfkit.Registry()
    batch = {"pair": Pair(torch.ones(2), [torch.ones(3), "keep"]), "step": 7}
    moved = perfkit.torch.to_device(batch, "cpu", registry=reg)
    assert isinstance(moved["pair"], Pair)
    assert moved["pair"].label[1] == "keep"
    assert moved["step"] == 7
    assert reg.snapshot()["h2d.copy"].count == 1


def test_disabled_perfkit_times_no_copy() -> None:
    reg = perfkit.Registry()
    perfkit.disable()
    try:
        perfkit.torch.to_device(torch.ones(2), "cpu", registry=reg)
    finally:
        perfkit.enable()
    assert "h2d.copy" not in reg.snapshot()


def test_pageable_copies_that_block_the_host_get_pinning_with_a_gain() -> None:
    # the H200's figures: 38.5 MB per batch, 3.5 ms pageable and blocking, 54 GB/s pinned
    found = Copies(count=100, host_s=0.35, gpu_s=0.35, bytes=3.85e9, pinned_bytes=0.0)
    advice = copy_advice(found, pinned_gb_per_s=54.0)
    assert advice is not None
    assert advice.change == {"pin_memory": True, "non_blocking": True}
    low, high = advice.gain_s
    assert low == pytest.approx(0.35 - 3.85e9 / 54e9)
    assert high == 0.35
    assert "100 batches copied to the device (3.9 GB, 100% from pageable memory)" in advice.message
    unmeasured = copy_advice(found)
    assert unmeasured is not None
    assert unmeasured.gain_s[0] == 0.0
    assert "not measured" in unmeasured.message


def test_pinned_copies_that_still_block_need_only_non_blocking() -> None:
    blocking = Copies(count=10, host_s=0.007, gpu_s=0.0071, bytes=3.85e8, pinned_bytes=3.85e8)
    assert copy_advice(blocking, pinned_gb_per_s=54.0).change == {"non_blocking": True}  # type: ignore[union-attr]
    overlapped = Copies(count=10, host_s=0.00015, gpu_s=0.0071, bytes=3.85e8, pinned_bytes=3.85e8)
    assert copy_advice(overlapped, pinned_gb_per_s=54.0) is None


def test_pinned_bandwidth_is_none_without_cuda() -> None:
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA: tests/gpu covers it")
    assert perfkit.torch.pinned_bandwidth() is None
