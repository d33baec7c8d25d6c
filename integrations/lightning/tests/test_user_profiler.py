"""A fit that uses one of Lightning's own profilers runs as it does without perfkit.

perfkit stands in front of ``trainer.profiler`` while it is attached and puts the user's profiler
back when it leaves. Lightning asks that profiler for its summary (``describe()``) after the
callbacks' teardown, so leaving must not tear the user's profiler down.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from lightning.pytorch import Trainer
from lightning.pytorch.demos.boring_classes import BoringModel
from lightning.pytorch.profilers import AdvancedProfiler, PyTorchProfiler, SimpleProfiler
from perfkit_lightning import PerfMonitor

import perfkit


def fit(tmp_path: Path, profiler: object) -> Trainer:
    trainer = Trainer(
        default_root_dir=str(tmp_path),
        max_epochs=1,
        limit_train_batches=15,
        limit_val_batches=3,
        profiler=profiler,
        callbacks=[PerfMonitor(sample_resources=False)],
        enable_progress_bar=False,
        enable_model_summary=False,
        logger=False,
        enable_checkpointing=False,
    )
    with perfkit.use_registry(perfkit.Registry()):
        trainer.fit(BoringModel())
    return trainer


def test_a_fit_with_lightnings_pytorch_profiler_ends_and_the_profiler_describes_it(tmp_path: Path) -> None:
    profiler = PyTorchProfiler(dirpath=str(tmp_path), filename="prof")
    trainer = fit(tmp_path, profiler)
    assert trainer.profiler is profiler  # perfkit's wrapper is gone, the user's is back
    assert trainer.state.finished
    assert list(tmp_path.glob("*prof*"))  # Lightning's describe() wrote the user's summary


@pytest.mark.parametrize("make", [SimpleProfiler, AdvancedProfiler])
def test_lightnings_other_profilers_still_summarise_the_fit(tmp_path: Path, make: type) -> None:
    profiler = make(dirpath=str(tmp_path), filename="prof")
    trainer = fit(tmp_path, profiler)
    assert trainer.profiler is profiler
    summary = (tmp_path / "fit-prof.txt").read_text()
    assert "run_training_batch" in summary or "training_step" in summary
