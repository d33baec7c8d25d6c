"""A monitored run is one session: assembled once, driven by events, holding no global state."""

from __future__ import annotations

import ast
import warnings
from pathlib import Path

import numpy as np
import pytest

import perfkit
from perfkit.monitor import Host, Options, Session
from perfkit.resources import ResourceSampler
from perfkit.run import read_run
from perfkit.stages import StageListener, StageWindow

ROOT = Path(__file__).resolve().parents[2]
SOURCES = [ROOT / "perfkit", *(ROOT / "integrations").glob("*/src")]


def epoch(session: Session, stage: str, number: int, steps: int = 2) -> None:
    session.begin(stage, number)
    for _ in range(steps):
        session.recorder.step_begin(stage)
        session.recorder.step_end(stage, batch=np.zeros((4, 2)))
    session.end(stage)


class Seen(StageListener):
    def __init__(self) -> None:
        self.ended: list[tuple[str, int]] = []

    def stage_ended(self, window: StageWindow) -> None:
        self.ended.append((window.stage, window.epoch))


class Broken(StageListener):
    def stage_ended(self, window: StageWindow) -> None:
        raise RuntimeError("a listener's bug")


def quiet(**options: object) -> Options:
    return Options(registry=perfkit.Registry(), console=False, sample_resources=False, **options)  # type: ignore[arg-type]


def test_each_window_reaches_the_monitor_and_every_listener_even_past_one_that_raises() -> None:
    seen = Seen()
    session = Session(quiet(), listeners=[Broken(), seen])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        epoch(session, "train", 0)
        epoch(session, "train", 1)
    assert seen.ended == [("train", 0), ("train", 1)]
    assert session.monitor is not None
    assert session.monitor.last_metrics["train"]["perf/train/samples"] == 8.0
    assert len([w for w in caught if "Broken.stage_ended failed" in str(w.message)]) == 1  # said once


def test_the_run_directory_is_made_at_the_first_window_and_finished_once(tmp_path: Path) -> None:
    session = Session(quiet(run_dir=tmp_path / "run"))
    assert not (tmp_path / "run").exists()  # a run that times nothing leaves nothing
    epoch(session, "val", 0)
    assert (tmp_path / "run" / "run.json").exists()
    session.finish()
    run = read_run(tmp_path / "run")
    assert [(w.stage, w.epoch) for w in run.windows] == [("val", 0)]
    assert run.final is not None
    assert (tmp_path / "run" / "verdicts.json").exists()


def test_a_session_that_published_nothing_writes_no_run_directory(tmp_path: Path) -> None:
    Session(quiet(run_dir=tmp_path / "run")).finish()
    assert not (tmp_path / "run").exists()


def test_off_the_publishing_rank_nothing_is_written_or_said(tmp_path: Path) -> None:
    said: list[str] = []
    options = Options(registry=perfkit.Registry(), run_dir=tmp_path / "run", sample_resources=False)
    session = Session(options, Host(say=said.append, rank=1, gather=lambda mine: [mine]))
    epoch(session, "train", 0)
    session.finish()
    assert not (tmp_path / "run").exists()
    assert said == []
    assert session.monitor is not None
    assert "train" in session.monitor.last_metrics


def test_the_sampler_is_leased_at_the_first_epoch_and_given_back_at_the_end() -> None:
    session = Session(Options(registry=perfkit.Registry(), console=False, sample_interval_s=0.05))
    assert session._sampler is None  # nothing runs before the first epoch
    session.begin("train", 0)
    sampler = session._sampler
    assert isinstance(sampler, ResourceSampler)
    assert sampler.running
    session.end("train")
    session.finish()
    assert session._sampler is None
    assert not sampler.running


def test_trainings_time_per_sample_carried_from_an_earlier_run_is_the_reference() -> None:
    session = Session(quiet(), train_s_per_sample=0.5)
    epoch(session, "val", 0)
    assert session.monitor is not None
    assert "perf/val/time_per_sample_vs_train_ratio" in session.monitor.last_metrics["val"]


def test_no_module_keeps_a_map_from_owners_to_their_live_state() -> None:
    """Sessions, drivers and monitors are owned by what uses them (a Trainer holds its driver), not
    by module-level maps keyed by their owner. (The core's weak sets of every registry, sampler and
    background queue are what a fork resets and an exit flushes: they map nothing.)"""
    found = []
    for folder in SOURCES:
        for path in folder.rglob("*.py"):
            for node in ast.parse(path.read_text(encoding="utf-8")).body:
                value = node.value if isinstance(node, (ast.Assign, ast.AnnAssign)) else None
                if isinstance(value, ast.Call) and "WeakKeyDictionary" in ast.unparse(value.func):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert found == []


@pytest.mark.parametrize("bad", [{"options": {}}, {"host": "rank 0"}, {"writer": "runs/x"}])
def test_a_session_refuses_what_is_not_its_parts(bad: dict[str, object]) -> None:
    with pytest.raises(TypeError, match=next(iter(bad))):
        Session(**bad)  # type: ignore[arg-type]


def test_torch_is_patched_only_while_a_stage_epoch_is_open() -> None:
    """The collectives' wrappers (and the step parts' hooks) go in with the first open stage and
    come out with the last, so a script's session leaves nothing patched between its windows."""
    import torch.distributed as dist

    original = dist.all_reduce
    session = Session(Options(registry=perfkit.Registry(), console=False, sample_resources=False))
    session.begin("train", 0)
    assert dist.all_reduce is not original
    session.begin("val", 0)
    session.end("val")
    assert dist.all_reduce is not original  # training's epoch is still open
    session.end("train")
    assert dist.all_reduce is original
