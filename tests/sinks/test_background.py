"""Sinks that talk to a network never hold up training (issue 14, item 5).

The MLflow case is real: an ``MlflowClient`` pointed at a port where nothing listens
(``http://127.0.0.1:9``) retries for minutes. The training thread's time is measured
with its own clock around each window's exit and around ``close()``.
"""

from __future__ import annotations

import functools
import threading
import time

import pytest

import perfkit
from perfkit import PerfkitWarning
from perfkit.sinks import Background, MlflowSink
from tests.conftest import FakeClock

window = functools.partial(perfkit.window, console=False)
"""perfkit.window, without its console block."""

UNREACHABLE = "http://127.0.0.1:9"


def test_an_unreachable_mlflow_server_costs_each_window_a_queue_put_and_the_end_a_bounded_flush(
    clock: FakeClock, reg: perfkit.Registry
) -> None:
    pytest.importorskip("mlflow")
    sink = MlflowSink(run_id="0" * 32, tracking_uri=UNREACHABLE, timeout_s=0.3, flush_s=1.0)
    exits = []
    for epoch in range(10):
        with window("val", epoch=epoch, registry=reg, sinks=[sink]):
            clock.advance(1_000_000)
            t0 = time.perf_counter()
        exits.append(time.perf_counter() - t0)  # the window's whole exit: metrics, fan-out, queue put
    with pytest.warns(PerfkitWarning, match=r"MlflowSink: 10 window\(s\) were not delivered"):
        t0 = time.perf_counter()
        sink.close()
        closing = time.perf_counter() - t0
    assert max(exits) < 0.25  # the server takes minutes to give up
    assert closing < 1.0 + 0.5  # flush_s, plus slack; never the client's retries
    assert sink.background.lost == 10


def test_a_failing_sink_opens_the_circuit_and_the_windows_after_are_dropped_at_once() -> None:
    now = [0.0]
    bg = Background("down", timeout_s=5, breaker_after=3, cooldown_s=60, monotonic=lambda: now[0])
    calls = []

    def down() -> None:
        calls.append(1)
        raise ConnectionError("refused")

    with pytest.warns(PerfkitWarning, match="3 failures in a row"):
        for _ in range(3):
            bg.submit(down)
            assert bg.flush(5)
        assert bg.submit(down) is False  # open: dropped without a call
        now[0] = 61.0  # the cooldown is over: one is tried again
        assert bg.submit(down) is True
        assert bg.flush(5)
        bg.close()
    assert len(calls) == 4
    assert bg.lost == 5
    assert bg.reasons == {"failed: ConnectionError": 4, "circuit open": 1}


def test_a_hung_call_trips_the_breaker_from_the_training_side_and_a_full_queue_drops() -> None:
    now = [0.0]
    release = threading.Event()
    bg = Background("hung", queue_size=2, timeout_s=10, flush_s=1, monotonic=lambda: now[0])
    started = threading.Event()

    def hang() -> None:
        started.set()
        release.wait(30)

    try:
        assert bg.submit(hang)
        assert started.wait(10)
        assert bg.submit(lambda: None)
        assert bg.submit(lambda: None)
        assert bg.submit(lambda: None) is False  # the queue holds 2
        now[0] = 11.0  # the call has run past timeout_s
        with pytest.warns(PerfkitWarning, match="a call has run for 11.0 s"):
            assert bg.submit(lambda: None) is False
        with pytest.warns(PerfkitWarning, match=r"hung: 5 window\(s\) were not delivered"):
            bg.close()
    finally:
        release.set()
    assert bg.reasons == {
        "queue full (2 windows)": 1,
        "circuit open": 1,
        "not sent within flush_s=1 s at the end": 2,
        "in flight at the end": 1,
    }
