"""perfkit.window in a plain script: exact per-window metrics, a run directory, sinks that may fail."""

from __future__ import annotations

import dataclasses
import functools
import gc
import json
import logging
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import perfkit
from perfkit._cli import main
from perfkit.run import RunWriter
from perfkit.stages import StageWindow, batch_size
from tests.conftest import FakeClock
from tests.run.run_dirs import MS, SlowLoader

window = functools.partial(perfkit.window, console=False)
"""perfkit.window, without its console block."""


class Recorder:
    """A sink that keeps what it is given."""

    def __init__(self) -> None:
        self.got: list[tuple[str, int, dict[str, float], int]] = []

    def emit(self, window: StageWindow, metrics: Mapping[str, float], step: int) -> None:
        self.got.append((window.stage, window.epoch, dict(metrics), step))

    def close(self) -> None:
        pass


class Down(Recorder):
    """A sink whose backend is down."""

    def emit(self, window: StageWindow, metrics: Mapping[str, float], step: int) -> None:
        raise ConnectionError("tracking server unreachable")


def epoch(
    clock: FakeClock, reg: perfkit.Registry, stage: str, *, wait_ms: int, body_ms: int, **kw: Any
) -> dict[str, float]:
    """One window over 3 batches of 4 rows: each waits ``wait_ms``, each body takes ``body_ms``."""
    with window(stage, epoch=kw.pop("epoch", 0), registry=reg, **kw) as w:
        for _ in w.iterate(SlowLoader(clock, batches=3, size=4, wait_ns=wait_ms * MS)):
            clock.advance(body_ms * MS)
    return w.metrics


def test_exact_wait_step_samples_and_wall_time(clock: FakeClock, reg: perfkit.Registry) -> None:
    m = epoch(clock, reg, "train", wait_ms=1, body_ms=5)
    assert m["perf/train/steps"] == 3.0
    assert m["perf/train/step_ms_mean"] == pytest.approx(5.0)
    assert m["perf/train/data_wait_ms_mean"] == pytest.approx(1.0)
    assert m["perf/train/epoch_s"] == pytest.approx(0.018)
    assert m["perf/train/data_wait_fraction"] == pytest.approx(1 / 6)
    assert m["perf/train/samples"] == 12.0
    assert m["perf/train/samples_per_s"] == pytest.approx(12 / 0.018)


def test_a_window_run_inside_a_step_is_taken_out_of_that_step(
    clock: FakeClock, reg: perfkit.Registry
) -> None:
    """Validation in the middle of a training loop: its time is training's nested time, never
    training's step, and training's account still adds up to its wall time."""
    with window("train", epoch=0, registry=reg) as train:
        for i, _ in enumerate(train.iterate(SlowLoader(clock, batches=3, size=4, wait_ns=1 * MS))):
            clock.advance(5 * MS)
            if i == 1:
                epoch(clock, reg, "val", wait_ms=2, body_ms=3)  # 15 ms
    m = train.metrics
    assert m["perf/train/time/step_s"] == pytest.approx(0.015)
    assert m["perf/train/nested_stages_s"] == pytest.approx(0.015)
    assert m["perf/train/epoch_s"] == pytest.approx(0.018)
    parts = [
        v
        for k, v in m.items()
        if k.startswith("perf/train/time/") and k.count("/") == 3 and k.endswith("_fraction")
    ]
    assert sum(parts) == pytest.approx(1.0)


def test_other_stages_are_compared_with_the_latest_training_window(
    clock: FakeClock, reg: perfkit.Registry
) -> None:
    epoch(clock, reg, "train", wait_ms=1, body_ms=5)  # 1.5 ms per sample
    val = epoch(clock, reg, "val", wait_ms=10, body_ms=2)  # 3 ms per sample
    assert val["perf/val/time_per_sample_vs_train_ratio"] == pytest.approx(2.0)
    epoch(clock, reg, "train", wait_ms=0, body_ms=3, epoch=1)  # 0.75 ms per sample
    val = epoch(clock, reg, "val", wait_ms=10, body_ms=2, epoch=1)
    assert val["perf/val/time_per_sample_vs_train_ratio"] == pytest.approx(4.0)
    other = perfkit.Registry(clock=clock)  # another registry, another reference
    assert "perf/val/time_per_sample_vs_train_ratio" not in epoch(clock, other, "val", wait_ms=1, body_ms=1)


def test_windows_go_to_the_run_directory_with_a_window_counter_as_step(
    tmp_path: Path, clock: FakeClock, reg: perfkit.Registry
) -> None:
    run = RunWriter(tmp_path / "run")
    sink = Recorder()
    for e in range(2):
        epoch(clock, reg, "train", wait_ms=1, body_ms=2, epoch=e, run=run, sinks=[sink])
        epoch(clock, reg, "val", wait_ms=1, body_ms=1, epoch=e, run=run, sinks=[sink])
    epoch(clock, reg, "test", wait_ms=1, body_ms=1, epoch=2, run=run, sinks=[sink], step=100)
    lines = [json.loads(x) for x in (tmp_path / "run" / "windows.jsonl").read_text().splitlines()]
    assert [(x["stage"], x["epoch"], x["step"]) for x in lines] == [
        ("train", 0, 0),
        ("val", 0, 1),
        ("train", 1, 2),
        ("val", 1, 3),
        ("test", 2, 100),
    ]
    assert [(p, e, s) for p, e, _, s in sink.got] == [(x["stage"], x["epoch"], x["step"]) for x in lines]
    assert {x["prefix"] for x in lines} == {"perf"}
    assert sink.got[1][2] == lines[1]["metrics"]
    assert [s["duration_s"] for s in lines[0]["slowest"]] == [pytest.approx(0.002)] * 3


def two_ranks(rank: int) -> Callable[[Any], list[Any]]:
    """A gather of a two-process job, played in one process: the other rank did exactly the same."""

    def gather(mine: Any) -> list[Any]:
        other = dataclasses.replace(mine, rank=1 - rank)
        return [mine, other] if rank == 0 else [other, mine]

    return gather


@pytest.mark.parametrize("rank", [0, 1])
def test_under_a_gather_every_rank_gets_the_merge_and_only_rank_0_sends(
    tmp_path: Path, clock: FakeClock, reg: perfkit.Registry, rank: int
) -> None:
    run, sink = RunWriter(tmp_path / "run"), Recorder()
    m = epoch(
        clock, reg, "train", wait_ms=1, body_ms=5, run=run, sinks=[sink], gather=two_ranks(rank), rank=rank
    )
    assert m["perf/train/steps"] == 6.0  # 3 on each rank
    assert m["perf/train/data_wait_fraction"] == pytest.approx(1 / 6)
    lines = tmp_path / "run" / "windows.jsonl"
    sent = (len(sink.got), len(lines.read_text().splitlines()) if lines.exists() else 0)
    assert sent == ((1, 1) if rank == 0 else (0, 0))


def test_perfkit_window_logs_the_epochs_block_on_rank_0_unless_told_not_to(
    clock: FakeClock, reg: perfkit.Registry, caplog: pytest.LogCaptureFixture
) -> None:
    def block(**kw: Any) -> list[str]:
        caplog.clear()
        with (
            caplog.at_level(logging.INFO, logger="perfkit.run"),
            perfkit.window("val", epoch=0, registry=reg, **kw) as w,
        ):
            for _ in w.iterate(SlowLoader(clock, batches=3, size=4, wait_ns=MS)):
                clock.advance(2 * MS)
        return [r.getMessage() for r in caplog.records if r.name == "perfkit.run"]

    (said,) = block()
    assert said.startswith("[perfkit] val epoch 0: 3 steps in 9.00 ms")
    assert "data wait 33% · step 67%" in said
    assert block(console=False) == []
    assert block(gather=two_ranks(1), rank=1) == []
    (merged,) = block(gather=two_ranks(0))  # rank: torch.distributed's, 0 without a process group
    assert merged.startswith("[perfkit] val epoch 0: 6 steps")


def test_an_exception_in_the_block_closes_the_window_and_propagates_unchanged(
    clock: FakeClock, reg: perfkit.Registry
) -> None:
    sink = Recorder()
    error = RuntimeError("CUDA out of memory")
    w = window("train", epoch=0, registry=reg, sinks=[sink])

    def fails_at_the_third_batch() -> None:
        with w:
            for i, _ in enumerate(w.iterate(SlowLoader(clock, batches=5, size=2, wait_ns=MS))):
                clock.advance(3 * MS)
                if i == 2:
                    raise error

    with pytest.raises(RuntimeError) as raised:
        fails_at_the_third_batch()
    assert raised.value is error
    assert w.metrics["perf/train/steps"] == 3.0  # the failing step is closed and kept
    assert w.metrics["perf/train/step_ms_max"] == pytest.approx(3.0)
    assert w.metrics["perf/train/samples"] == 6.0
    assert [s[0] for s in sink.got] == ["train"]


def test_a_loop_left_by_break_keeps_its_steps(clock: FakeClock, reg: perfkit.Registry) -> None:
    with window("val", epoch=0, registry=reg) as w:
        for i, _ in enumerate(w.iterate(SlowLoader(clock, batches=10, size=2, wait_ns=MS))):
            clock.advance(2 * MS)
            if i == 1:
                break
    assert w.metrics["perf/val/steps"] == 2.0
    assert w.metrics["perf/val/step_ms_mean"] == pytest.approx(2.0)


class Batches(list[int]):
    """A list that a weak reference can point at."""


def test_an_ended_window_holds_no_loader_so_refcounting_frees_it(reg: perfkit.Registry) -> None:
    # held in a cycle, a DataLoader's persistent workers were shut down by the cycle collector:
    # torch then waits 5 s for each one (a 2-worker loader: 10 s) before terminating it
    loader = Batches(range(4))
    gone = weakref.ref(loader)
    gc.disable()
    try:
        with window("train", epoch=0, registry=reg) as w:
            for _ in w.iterate(loader):
                pass
        del loader
        assert gone() is None
    finally:
        gc.enable()
    assert w.metrics["perf/train/steps"] == 4.0  # the window still has what it measured


def test_a_sink_that_raises_is_warned_about_once_and_the_others_still_get_the_metrics(
    clock: FakeClock, reg: perfkit.Registry
) -> None:
    good = Recorder()
    with pytest.warns(perfkit.PerfkitWarning, match="Down.emit failed: ConnectionError") as seen:
        for e in range(3):
            epoch(clock, reg, "train", wait_ms=1, body_ms=1, epoch=e, sinks=[Down(), good])
    assert len([w for w in seen if "Down.emit" in str(w.message)]) == 1
    assert [(p, e) for p, e, _, _ in good.got] == [("train", 0), ("train", 1), ("train", 2)]


@dataclass
class Batch:
    meta: list[str]
    pixels: np.ndarray


@pytest.mark.parametrize(
    ("batch", "size"),
    [
        (np.zeros((8, 3)), 8),
        ({"ids": ["a", "b"], "image": np.zeros((5, 2))}, 5),
        ((np.float64(1.0), [np.zeros((3,))]), 3),  # a 0-d array has no first dimension
        (Batch(["x"], np.zeros((6, 6))), 6),
        (["no", "arrays"], None),
    ],
)
def test_samples_are_the_first_dimension_of_the_first_array(batch: object, size: int | None) -> None:
    assert batch_size(batch) == size


def test_samples_can_be_counted_by_hand(clock: FakeClock, reg: perfkit.Registry) -> None:
    with window("predict", epoch=0, registry=reg) as w:
        for item in w.iterate(["a.jpg", "b.jpg"]):  # no arrays: nothing counted
            w.add_samples(len(item))
            clock.advance(MS)
    assert w.metrics["perf/predict/samples"] == 10.0
    with window("predict", epoch=1, registry=reg) as w:
        for _ in w.iterate(["a.jpg"]):
            clock.advance(MS)
    assert "perf/predict/samples" not in w.metrics


def test_disabled_it_iterates_and_records_and_sends_nothing(clock: FakeClock, reg: perfkit.Registry) -> None:
    perfkit.disable()
    sink = Recorder()
    with window("train", epoch=0, registry=reg, sinks=[sink]) as w:
        assert len(list(w.iterate(SlowLoader(clock, batches=2, size=4, wait_ns=MS)))) == 2
    assert (w.window, w.metrics, sink.got) == (None, {}, [])
    assert len(reg.snapshot()) == 0


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"stage": ""}, ValueError, "stage must be a non-empty str, got ''"),
        ({"epoch": -1}, ValueError, "epoch must be an int >= 0, got -1"),
        ({"epoch": True}, ValueError, "epoch must be an int >= 0, got True"),
        ({"step": 1.5}, ValueError, "step must be an int >= 0, got 1.5"),
        ({"sinks": Recorder()}, TypeError, "sinks must be a list of sinks, got <"),
        ({"sinks": [object()]}, TypeError, "has no emit"),
        ({"run": "runs/exp1"}, TypeError, "run must be a perfkit.run.RunWriter or None, got 'runs/exp1'"),
        ({"listeners": [object()]}, TypeError, "is not a perfkit.stages.StageListener"),
        ({"registry": {}}, TypeError, "registry must be a perfkit.Registry or None"),
    ],
)
def test_arguments_are_checked_when_the_window_is_made(
    kwargs: dict[str, Any], error: type[Exception], message: str
) -> None:
    args: dict[str, Any] = {"stage": "train", "epoch": 0, **kwargs}
    with pytest.raises(error, match=message.replace("(", r"\(").replace(".", r"\.")):
        window(args.pop("stage"), **args)


def test_a_window_is_entered_once_and_iterated_inside_its_block(reg: perfkit.Registry) -> None:
    w = window("train", epoch=0, registry=reg)
    with pytest.raises(RuntimeError, match="inside the window's with block"):
        w.iterate([1])
    with w:
        pass
    with pytest.raises(RuntimeError, match="already entered"), w:
        pass


def test_perfkit_report_reads_a_standalone_run(
    tmp_path: Path, clock: FakeClock, reg: perfkit.Registry, capsys: pytest.CaptureFixture[str]
) -> None:
    run = RunWriter(tmp_path / "run")
    for e in range(2):  # epochs of 60 ms and 150 ms: enough to judge (3 steps, 50 ms)
        epoch(clock, reg, "train", wait_ms=2, body_ms=18, epoch=e, run=run)
        epoch(clock, reg, "val", wait_ms=45, body_ms=5, epoch=e, run=run)
    run.finish(reg.snapshot())
    assert main(["report", str(tmp_path / "run")]) == 0
    assert capsys.readouterr().out.strip() == str(tmp_path / "run" / "report.html")
    page = (tmp_path / "run" / "report.html").read_text()
    assert "validation waits for its data loader 90% of the epoch" in page


class Rows:
    """Items that take 2 ms each to load in a DataLoader worker (``load``)."""

    def __len__(self) -> int:
        return 8

    @perfkit.timed("load")
    def __getitem__(self, i: int) -> np.ndarray:
        import time

        time.sleep(0.002)
        return np.full(4, float(i), dtype=np.float32)


def test_an_instrumented_loader_and_a_window_of_the_same_stage_meet() -> None:
    """``instrument(loader, "train")`` and ``window("train")``: the worker metrics need no other name."""
    pytest.importorskip("torch")
    from torch.utils.data import DataLoader

    import perfkit.torch

    reg = perfkit.Registry()
    loader = perfkit.torch.instrument(
        DataLoader(Rows(), batch_size=2, num_workers=2, multiprocessing_context="fork"), "train"
    )
    with perfkit.use_registry(reg), window("train", epoch=0, registry=reg) as w:
        for _ in w.iterate(loader):
            pass
    m = w.metrics
    assert m["perf/train/workers"] == 2.0
    assert m["perf/train/worker_batch_ms_mean"] >= 4.0  # two items of 2 ms each per batch
    assert "perf/train/workers_needed" in m
    assert m["perf/train/series/load/count"] == 8.0
