"""``PerfMonitor(trial=True)``: the train DataLoader timed alone as training starts, logged and recorded."""

from __future__ import annotations

from pathlib import Path

import pytest
from perfkit_lightning import PerfMonitor

import perfkit
from perfkit.run import read_run

from .tiny import Tiny, said, trainer


def test_a_fit_with_trial_on_logs_the_trial_and_records_it_in_the_run(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    monitor = PerfMonitor(trial=True, trial_budget_s=2.0, run_dir=str(run_dir))
    with perfkit.use_registry(perfkit.Registry()), said() as lines:
        trainer(str(tmp_path), [monitor], max_epochs=1, num_sanity_val_steps=0, logger=False).fit(Tiny())
    assert "Loader trial of the train DataLoader, without the model" in lines.text
    (trial,) = read_run(run_dir).trials
    assert trial.loader == "train"
    assert trial.budget_s == 2.0
    assert trial.settings


def test_the_trial_is_off_by_default_and_its_budget_is_checked() -> None:
    assert PerfMonitor().trial is False
    with pytest.raises(ValueError, match="trial_budget_s"):
        PerfMonitor(trial=True, trial_budget_s=0)
