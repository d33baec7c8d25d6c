"""Interval windows on real step-based fits: an answer after the warm-up, long before the fit ends.

Each fit trains on an ``IterableDataset`` without a length, for ``max_steps``: its one epoch
ends with the fit. The test's own clocks (``time.perf_counter`` around every ``next()`` on the
loader, and at each batch's end) give the truth the provisional verdicts are checked against.
"""

from __future__ import annotations

import itertools
import logging
import re
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import lightning as L
import pytest
import torch
from lightning.pytorch.callbacks import Callback
from perfkit_lightning import PerfMonitor
from torch.utils.data import DataLoader, IterableDataset

from perfkit.run import read_run
from perfkit.sinks import Sink
from perfkit.stages import Intervals, StageWindow

from .planted import Plan
from .planted import fit as planted_fit

TOLERANCE = 0.05  # points of share between the provisional verdict and the truth


class Clock:
    """The test's own clock: each wait for a batch, each batch's end, and what perfkit sent when."""

    def __init__(self) -> None:
        self.waits: list[tuple[float, float]] = []
        self.batch_ends: dict[int, float] = {}
        self.arrived: list[tuple[float, StageWindow, Mapping[str, float], int]] = []
        self.fit_end = 0.0

    def share_of_waits(self, first: int, last: int) -> float:
        """The loop's wait for data between the end of step ``first - 1`` and the end of ``last``."""
        t0, t1 = self.batch_ends[first - 1], self.batch_ends[last]
        waits = sum(min(b, t1) - max(a, t0) for a, b in self.waits if b > t0 and a < t1)
        return waits / (t1 - t0)


CLOCK = Clock()


class Stream(IterableDataset[tuple[torch.Tensor, torch.Tensor]]):
    """An endless stream of rows, each ``row_s`` seconds to read (a slow shard), ``slow_row_s`` from
    row ``slow_from`` on."""

    def __init__(self, row_s: float, slow_from: int | None = None, slow_row_s: float = 0.0) -> None:
        self.row_s, self.slow_from, self.slow_row_s = row_s, slow_from, slow_row_s

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        g = torch.Generator().manual_seed(0)
        for row in itertools.count():
            slow = self.slow_from is not None and row >= self.slow_from
            time.sleep(self.slow_row_s if slow else self.row_s)
            x = torch.randn(8, generator=g)
            yield x, x.sum(0, keepdim=True)


class TimedLoader(DataLoader[Any]):
    def __iter__(self) -> Any:
        it = super().__iter__()

        class Timed:
            def __iter__(self) -> Any:
                return self

            def __next__(self) -> Any:
                t0 = time.perf_counter()
                item = next(it)
                CLOCK.waits.append((t0, time.perf_counter()))
                return item

        return Timed()


class Model(L.LightningModule):
    """A linear model whose step sleeps ``step_s``, and ``slow_s`` from step ``slow_from`` on."""

    def __init__(
        self,
        row_s: float,
        step_s: float,
        slow_from: int | None = None,
        slow_s: float = 0.0,
        stream: Stream | None = None,
    ) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(8, 1)
        self.row_s, self.step_s, self.slow_from, self.slow_s = row_s, step_s, slow_from, slow_s
        self.stream = stream or Stream(row_s)

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        x, y = batch
        slow = self.slow_from is not None and batch_idx >= self.slow_from
        time.sleep(self.slow_s if slow else self.step_s)
        return torch.nn.functional.mse_loss(self.layer(x), y)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.01)

    def train_dataloader(self) -> TimedLoader:
        return TimedLoader(self.stream, batch_size=4)


class Stamps(Callback):
    def on_train_batch_end(self, trainer: L.Trainer, *args: Any) -> None:
        CLOCK.batch_ends[args[-1]] = time.perf_counter()

    def on_train_batch_start(self, trainer: L.Trainer, *args: Any) -> None:
        CLOCK.batch_ends.setdefault(-1, time.perf_counter())


class Arrivals(Sink):
    """What perfkit sent, and when on the test's clock."""

    def emit(self, window: StageWindow, metrics: Mapping[str, float], step: int) -> None:
        CLOCK.arrived.append((time.perf_counter(), window, metrics, step))

    def close(self) -> None:
        pass


def fit(tmp_path: Path, model: Model, max_steps: int, monitor: PerfMonitor) -> None:
    CLOCK.__init__()  # type: ignore[misc]
    trainer = L.Trainer(
        max_steps=max_steps,
        accelerator="cpu",
        devices=1,
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        enable_checkpointing=False,
        num_sanity_val_steps=0,
        limit_val_batches=0,
        default_root_dir=str(tmp_path),
        callbacks=[Stamps(), monitor],
    )
    trainer.fit(model)
    CLOCK.fit_end = time.perf_counter()


def test_a_slow_loader_is_named_after_the_warm_up_long_before_the_fit_ends(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, record_property: Any
) -> None:
    monitor = PerfMonitor(
        sample_resources=False,
        run_dir=str(tmp_path / "run"),
        interval_steps=40,
        console=True,
        sinks=[Arrivals()],
    )
    with caplog.at_level(logging.INFO):
        fit(tmp_path, Model(row_s=0.003, step_s=0.004), 250, monitor)
    intervals = [(t, w, m, s) for t, w, m, s in CLOCK.arrived if w.is_interval]
    t, first, metrics, step = intervals[0]
    assert first.steps == (10, 49)  # the warm-up's ten steps left out
    assert step == 49  # logged at the global step
    assert "perf/interval/train/data_wait_fraction" in metrics
    top = first.verdicts[0]
    truth = CLOCK.share_of_waits(10, 49)
    record_property("share", round(top.share, 3))
    record_property("truth", round(truth, 3))
    start = CLOCK.batch_ends[-1]
    record_property("arrived_s", round(t - start, 2))
    record_property("fit_s", round(CLOCK.fit_end - start, 2))
    assert top.kind == "INPUT_BOUND"
    assert top.share == pytest.approx(truth, abs=TOLERANCE)
    assert t - start < 0.3 * (CLOCK.fit_end - start)  # long before the fit ends
    said = caplog.text
    assert "steps 10-49 (provisional: the epoch is still running)" in said
    assert "steps 0-9 left out" in said
    assert "INPUT_BOUND" in said
    run = read_run(tmp_path / "run")
    assert [w.stage for w in run.windows] == ["train"]  # the epoch window, as before
    assert [x.steps for x in run.intervals][:3] == [(10, 49), (50, 89), (90, 129)]
    assert run.intervals[0].metric("data_wait_fraction") == pytest.approx(
        metrics["perf/interval/train/data_wait_fraction"]
    )


def test_a_slowdown_planted_after_step_k_is_a_change_from_near_k(
    tmp_path: Path, record_property: Any
) -> None:
    k = 130
    monitor = PerfMonitor(
        sample_resources=False, run_dir=str(tmp_path / "run"), interval_steps=30, sinks=[Arrivals()]
    )
    fit(tmp_path, Model(row_s=0.0, step_s=0.004, slow_from=k, slow_s=0.016), 250, monitor)
    changes = [v for _, w, _, _ in CLOCK.arrived if w.is_interval for v in w.verdicts if v.kind == "CHANGE"]
    assert changes, [w.verdicts for _, w, _, _ in CLOCK.arrived]
    first = changes[0]
    record_property("change_start_step", first.evidence["start_step"])
    assert first.subject == "step"
    assert abs(first.evidence["start_step"] - k) <= 5
    assert f"from step {int(first.evidence['start_step'])}" in first.message
    quiet = [
        v for _, w, _, _ in CLOCK.arrived if w.is_interval and w.steps and w.steps[1] < k for v in w.verdicts
    ]
    assert not [v for v in quiet if v.kind == "CHANGE"]  # before K nothing moved


def test_a_step_based_fit_is_cut_by_default(tmp_path: Path) -> None:
    monitor = PerfMonitor(
        sample_resources=False, run_dir=str(tmp_path / "run"), sinks=[Arrivals()], interval_steps=20
    )
    fit(tmp_path, Model(row_s=0.0, step_s=0.001), 60, monitor)
    cut = [(w.steps, step) for _, w, _, step in CLOCK.arrived if w.is_interval]
    assert cut == [((10, 29), 29), ((30, 49), 49), ((50, 59), 59)]  # the fit's last steps too, at their step


def _shape(text: str) -> list[str]:
    """perfkit's console blocks: their first lines without numbers, and the labels of the others
    (times, and so the order of small parts, differ from run to run)."""
    return [
        re.sub(r"[0-9.]+", "#", line.split("[perfkit]", 1)[1]) if "[perfkit]" in line else line.split()[0]
        for line in text.splitlines()
        if "[perfkit]" in line or line.startswith("  ")
    ]


def test_a_short_epoch_fit_is_as_before_intervals(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    said, windows = [], []
    for intervals in (False, None):  # off, and the default
        monitor = PerfMonitor(
            sample_resources=False, run_dir=str(tmp_path / str(intervals)), console=True, intervals=intervals
        )
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="perfkit"):
            planted_fit(Plan(train_n=80, train_step_s=0.01), str(tmp_path), [monitor])
        said.append(_shape(caplog.text))
        run = read_run(tmp_path / str(intervals))
        windows.append([(w.stage, w.epoch, w.step, sorted(w.metrics)) for w in run.windows])
        assert not run.intervals
        assert not list((tmp_path / str(intervals)).glob("intervals*"))
    heads = [[line for line in lines if line.startswith(" ")] for lines in said]
    assert heads[0] == heads[1]  # the same blocks, in the same order (their lines vary with noise)
    assert not any("provisional" in line for line in said[1])
    assert sum(line.startswith(" train epoch #: # steps") for line in said[0]) == 2
    assert windows[0] == windows[1]


SCALE = 16
"""The default plan, 16 times faster: a fit of about 4.4 s stands for the issue's 70 s one."""
DEFAULT = Intervals()
SCALED = Intervals(
    first_s=DEFAULT.first_s / SCALE,
    first_steps=DEFAULT.first_steps // SCALE,
    steady_s=DEFAULT.steady_s / SCALE,
)
PLANTED = 100  # the step from which each batch takes 20 ms to read rather than 5


@pytest.fixture(scope="module")
def default_plan_fit(tmp_path_factory: pytest.TempPathFactory) -> Clock:
    """A step-based fit on the default plan, scaled: 5 ms of data and 4 ms of step per batch, the
    data 20 ms from step ``PLANTED``; what perfkit sent, and when, on the test's clock."""
    tmp = tmp_path_factory.mktemp("default_plan")
    monitor = PerfMonitor(
        sample_resources=False, run_dir=str(tmp / "run"), sinks=[Arrivals()], intervals=SCALED
    )
    stream = Stream(0.00125, slow_from=4 * PLANTED, slow_row_s=0.005)  # 4 rows a batch
    fit(tmp, Model(row_s=0.0, step_s=0.004, stream=stream), 220, monitor)
    clock = Clock()
    clock.__dict__.update(CLOCK.__dict__)
    return clock


def test_the_first_answer_comes_within_a_quarter_of_the_fit_and_is_right(
    default_plan_fit: Clock, record_property: Any
) -> None:
    clock = default_plan_fit
    t, first, _, _ = next(x for x in clock.arrived if x[1].is_interval)
    top = first.verdicts[0]
    start, fit_s = clock.batch_ends[-1], clock.fit_end - clock.batch_ends[-1]
    truth = clock.share_of_waits(*(first.steps or (0, 0)))
    record_property("first_arrived_s", round(t - start, 2))
    record_property("fit_s", round(fit_s, 2))
    record_property("share_vs_truth", (round(top.share, 3), round(truth, 3)))
    assert first.steps == (10, 10 + SCALED.first_steps - 1)  # after the warm-up, the plan's first
    assert t - start < fit_s / 4
    assert top.kind == "INPUT_BOUND"
    assert top.share == pytest.approx(truth, abs=TOLERANCE)


def test_a_slower_loader_from_a_planted_step_is_a_change_from_that_step(
    default_plan_fit: Clock, record_property: Any
) -> None:
    clock = default_plan_fit
    called = [  # the planted part's (the step's own time may move too on a machine other work shares)
        (w.steps, v)
        for _, w, _, _ in clock.arrived
        if w.is_interval
        for v in w.verdicts
        if (v.kind, v.subject) == ("CHANGE", "data_wait")
    ]
    assert called, [w.verdicts for _, w, _, _ in clock.arrived]
    (first, last), change = called[0]
    record_property("change", (first, last, change.evidence["start_step"]))
    assert abs(change.evidence["start_step"] - PLANTED) <= last - first + 1  # within the interval's steps
    assert first <= PLANTED <= last  # called in the interval it began in
    began_s = clock.batch_ends[PLANTED - 1] - clock.batch_ends[-1]  # its wait began as the step before ended
    assert change.evidence["start_s"] == pytest.approx(began_s, abs=0.25)
    assert change.evidence["after_s"] > 2.5 * change.evidence["before_s"]  # 20 ms against 5 ms a batch
