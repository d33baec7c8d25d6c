"""Warnings perfkit gives from inside training never raise into it (issue 14, item 11).

Where warnings are errors (``pytest -W error``, ``warnings.simplefilter("error")``),
``warnings.warn`` raises; perfkit then logs the message on the "perfkit" logger.
"""

from __future__ import annotations

import functools
import logging
import warnings
from collections.abc import Mapping

import pytest

import perfkit
from perfkit.stages import StageWindow
from tests.conftest import FakeClock

window = functools.partial(perfkit.window, console=False)
"""perfkit.window, without its console block."""


class Down:
    """A sink whose server is down."""

    def emit(self, window: StageWindow, metrics: Mapping[str, float], step: int) -> None:
        raise ConnectionError("server down")

    def close(self) -> None:
        pass


def test_a_failing_sink_with_warnings_as_errors_is_logged_and_the_loop_goes_on(
    reg: perfkit.Registry, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="perfkit")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for epoch in range(3):
            with window("val", epoch=epoch, registry=reg, sinks=[Down()]) as w:
                for _ in w.iterate(range(2)):
                    pass
    assert w.metrics["perf/val/steps"] == 2.0
    assert "Down.emit failed: ConnectionError('server down')" in caplog.text


def test_a_drain_that_drops_records_with_warnings_as_errors_does_not_raise(
    clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="perfkit")
    reg = perfkit.Registry(clock=clock, max_series=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for i in range(3):
            with perfkit.section(f"s{i}", registry=reg):
                pass
        snap = reg.snapshot()
    assert snap.dropped == {"past max_series: s": 2}
    assert "max_series=1" in caplog.text
