"""``perfkit run`` decides each loop's stage by what the script does around it, and records what
the advice needs: a Hugging Face Trainer's evaluations (autograd turned off inside each step,
after ``model.eval()``) are validation, not training; a plain loop that never sets the model's
mode is taken for training and says it was a guess."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from perfkit.run import read_run
from tests.test_run_command import perfkit_run, script

pytest.importorskip("transformers")
HERE = Path(__file__).parent


def test_a_hugging_face_trainers_evaluations_are_validation(tmp_path: Path) -> None:
    done = perfkit_run(tmp_path, sys.executable, str(HERE / "autorun_hf_train.py"), str(tmp_path / "out"))
    assert done.returncode == 0, done.stderr[-3000:]
    run = read_run(tmp_path / "run")
    seen = [(w.stage, w.epoch, w.metric("steps")) for w in run.windows]
    assert seen == [("train", 0, 16.0), ("val", 0, 4.0), ("train", 1, 16.0), ("val", 1, 4.0)]
    assert all(w.window.stage_guess is None for w in run.windows)  # model.train() / eval() said so


def test_a_loop_that_never_sets_the_models_mode_is_training_by_a_guess_it_says(tmp_path: Path) -> None:
    train = script(tmp_path, "epoch(0.001)\n")
    done = perfkit_run(tmp_path, sys.executable, train)
    assert done.returncode == 0, done.stderr
    (window,) = read_run(tmp_path / "run").windows
    assert window.stage == "train"
    assert window.window.stage_guess is not None
    assert "no model.train() or model.eval()" in window.window.stage_guess


def test_the_loaders_settings_and_cpu_split_are_recorded_for_the_advice(tmp_path: Path) -> None:
    train = script(tmp_path, "epoch(0.001)\n")
    perfkit_run(tmp_path, sys.executable, train)
    (window,) = read_run(tmp_path / "run").windows
    gauges = window.snapshot.gauges
    assert gauges["train.loader.num_workers"].last == 0.0
    assert gauges["train.data.wait_cpu_s"].count == 10  # one a batch
