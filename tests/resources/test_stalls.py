"""A hung NVML never holds up training (issue 14, item 5).

The fake ``pynvml`` hangs like a wedged driver: a call blocks until the test lets it go
(30 s at most). The training thread's time in the sampler is measured with its own clock
(``time.perf_counter`` around the call); the bound is ``timeout_s`` plus scheduling slack,
far below the hang.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from perfkit import PerfkitWarning, Registry, ResourceSampler
from perfkit.resources import NvmlSource
from perfkit.stages import StageRecorder
from tests.resources.test_sources import FakeNvml

pytestmark = pytest.mark.filterwarnings("ignore::perfkit.PerfkitWarning")  # from threads left behind
TIMEOUT_S = 0.2
SLACK_S = 0.8  # a loaded 2-core VM: still 30x below the 30 s hang


class HangingNvml(FakeNvml):
    """``nvmlDeviceGetMemoryInfo`` (or ``nvmlInit``) blocks until ``release`` is set."""

    def __init__(self, hang_in: str = "memory") -> None:
        super().__init__(devices=1)
        self.hang_in = hang_in
        self.release = threading.Event()
        self.entered = threading.Event()

    def _hang(self, call: str) -> None:
        if call == self.hang_in:
            self.entered.set()
            self.release.wait(30)

    def nvmlInit(self) -> None:
        self._hang("init")

    def nvmlDeviceGetMemoryInfo(self, handle: str) -> Any:
        self._hang("memory")
        return super().nvmlDeviceGetMemoryInfo(handle)


@pytest.fixture
def hanging() -> Iterator[HangingNvml]:
    nvml = HangingNvml()
    yield nvml
    nvml.release.set()


def timed(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


@pytest.mark.filterwarnings("ignore::perfkit.PerfkitWarning")
def test_sample_now_at_every_epoch_end_returns_within_the_timeout_while_nvml_hangs(
    reg: Registry, hanging: HangingNvml
) -> None:
    sampler = ResourceSampler(60, registry=reg, sources=[NvmlSource(hanging)], timeout_s=TIMEOUT_S)
    assert timed(sampler.start) < TIMEOUT_S + SLACK_S
    assert hanging.entered.wait(10)  # the sampler's first sample is stuck in the driver
    first = timed(sampler.sample_now)
    later = [timed(sampler.sample_now) for _ in range(20)]  # 20 more epoch ends
    assert first < TIMEOUT_S + SLACK_S
    assert max(later) < SLACK_S  # the sampler is known to be stuck: no wait at all
    assert sampler.stuck == "nvml"
    assert timed(sampler.stop) < TIMEOUT_S + SLACK_S
    hanging.release.set()


def test_a_window_end_is_not_held_up_by_a_hung_sampler(reg: Registry, hanging: HangingNvml) -> None:
    sampler = ResourceSampler(60, registry=reg, sources=[NvmlSource(hanging)], timeout_s=TIMEOUT_S).start()
    assert hanging.entered.wait(10)
    rec = StageRecorder(reg, sampler=sampler)
    with pytest.warns(PerfkitWarning, match="stuck in source 'nvml' while sampling"):
        for epoch in range(3):
            rec.begin("val", epoch)
            rec.step_begin("val")
            rec.step_end("val")
            assert timed(lambda: rec.end("val")) < TIMEOUT_S + SLACK_S
        assert timed(sampler.stop) < TIMEOUT_S + SLACK_S


def test_a_hung_nvml_init_does_not_hold_up_start(reg: Registry) -> None:
    nvml = HangingNvml(hang_in="init")
    try:
        sampler = ResourceSampler(60, registry=reg, sources=[NvmlSource(nvml)], timeout_s=TIMEOUT_S)
        with pytest.warns(PerfkitWarning, match="stuck in source 'nvml' while opening"):
            assert timed(sampler.start) < TIMEOUT_S + SLACK_S
        assert timed(sampler.stop) < TIMEOUT_S + SLACK_S
    finally:
        nvml.release.set()


def test_a_source_that_overruns_three_times_is_dropped_and_the_others_go_on(reg: Registry) -> None:
    class Slow:
        name = "slow"
        calls = 0

        def open(self) -> None: ...
        def close(self) -> None: ...

        def sample(self, warn: object) -> dict[str, float]:
            self.calls += 1
            threading.Event().wait(TIMEOUT_S * 1.5)  # overruns the timeout, then returns
            return {"slow.value": 1.0}

    class Quick:
        name = "quick"

        def open(self) -> None: ...
        def close(self) -> None: ...

        def sample(self, warn: object) -> dict[str, float]:
            return {"quick.value": 1.0}

    slow = Slow()
    sampler = ResourceSampler(0.01, registry=reg, sources=[slow, Quick()], timeout_s=TIMEOUT_S)
    with pytest.warns(PerfkitWarning, match="source 'slow' took .* it is dropped after 3"):
        sampler.start()
        deadline = time.monotonic() + 20
        while "slow" in sampler.sources and time.monotonic() < deadline:
            threading.Event().wait(0.05)
        sampler.stop()
    assert sampler.strikes["slow"] == 3
    assert slow.calls == 3
    assert sampler.sources == ["quick"]
    assert reg.snapshot().gauges["quick.value"].count > 3
