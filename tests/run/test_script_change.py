"""A change in the middle of a plain script's step-based loop is called, not just shown: at the
step the test planted it, from what to what, in the console, the summary, its JSON and the report.

The loop runs on a fake clock the test moves (``Registry(clock=...)``): each batch takes 5 ms to
make until step ``PLANTED``, 40 ms from it on, each step 4.6 ms, all with a seeded jitter of 20%.
The truth (the step, its time into the epoch, the waits before and after) is the test's own.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import perfkit
from perfkit._cli import main
from perfkit.reports import write_html_report
from perfkit.run import RunWriter, read_run
from tests.conftest import FakeClock

PLANTED = 700
STEPS = 1200  # the default plan: intervals of steps 10-309 and 310-909, then 910 on (not cut: the epoch ends)


class Truth:
    def __init__(self) -> None:
        self.clock = FakeClock()
        self.rng = np.random.default_rng(0)
        self.waits: list[int] = []
        self.wait_starts: list[int] = []
        self.began = self.clock.now  # the epoch's start

    def jitter(self, ms: float) -> int:
        return int(ms * 1e6 * self.rng.uniform(0.8, 1.2))

    def stream(self) -> Iterator[np.ndarray]:
        for i in range(STEPS):
            self.wait_starts.append(self.clock.now)
            self.waits.append(self.jitter(5.0 if i < PLANTED else 40.0))
            self.clock.advance(self.waits[-1])
            yield np.zeros((2, 4))


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Truth, str]:
    truth = Truth()
    path = tmp_path_factory.mktemp("change") / "run"
    writer = RunWriter(path)
    reg = perfkit.Registry(clock=truth.clock)
    handler, logger = _Kept(), logging.getLogger("perfkit")
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        with perfkit.window("train", epoch=0, registry=reg, run=writer) as w:
            for _ in w.iterate(truth.stream()):
                truth.clock.advance(truth.jitter(4.6))
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    writer.finish(reg.snapshot())
    return path, truth, "\n".join(handler.said)


class _Kept(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.said: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.said.append(record.getMessage())


def test_the_change_is_called_in_the_interval_it_began_in_from_near_the_planted_step(
    run: tuple[Path, Truth, str], record_property: object
) -> None:
    path, truth, _ = run
    called = [(x.steps, v) for x in read_run(path).intervals for v in x.verdicts if v.kind == "CHANGE"]
    (steps, first), *_ = called
    assert steps == (310, 909)  # the interval the change began in, not the one after
    assert first.subject == "data_wait"
    start = int(first.evidence["start_step"])
    assert abs(start - PLANTED) <= steps[1] - steps[0] + 1  # within one interval's worth of steps
    assert abs(start - PLANTED) <= 3
    began_s = (truth.wait_starts[PLANTED] - truth.began) / 1e9
    assert first.evidence["start_s"] == pytest.approx(began_s, abs=0.05)
    before = np.mean(truth.waits[:PLANTED]) / 1e9
    after = np.mean(truth.waits[PLANTED : steps[1] + 1]) / 1e9
    assert first.evidence["before_s"] == pytest.approx(before, rel=0.1)
    assert first.evidence["after_s"] == pytest.approx(after, rel=0.1)
    quiet = [v for x in read_run(path).intervals if x.steps[1] < PLANTED for v in x.verdicts]
    assert not [v for v in quiet if v.kind == "CHANGE"]


def test_the_change_is_said_in_the_console_the_summary_its_json_and_the_report(
    run: tuple[Path, Truth, str], capsys: pytest.CaptureFixture[str]
) -> None:
    path, _, console = run
    first = next(v for x in read_run(path).intervals for v in x.verdicts if v.kind == "CHANGE")
    said = f"from step {int(first.evidence['start_step'])} of train epoch 0"
    assert said in console
    assert main(["summary", str(path)]) == 0
    summary = capsys.readouterr().out
    assert "Changes while it ran" in summary
    assert said in summary
    assert main(["summary", str(path), "--json"]) == 0
    (change,) = json.loads(capsys.readouterr().out)["changes"]
    assert (change["kind"], change["evidence"]["start_step"]) == ("CHANGE", first.evidence["start_step"])
    assert said in write_html_report(path).read_text()
