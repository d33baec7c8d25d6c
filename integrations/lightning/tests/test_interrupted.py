"""A fit interrupted inside a profiler window still lists its trace and leaves no thread (issue 14, item 10),
and a failing logger never crashes a fit whose warnings are errors (item 11)."""

from __future__ import annotations

import os
import signal
import threading
import warnings
from pathlib import Path
from typing import Any

import pytest
import torch
from perfkit_lightning import PerfMonitor, ProfilerCallback

import perfkit
from perfkit.run import read_run

from .tiny import BrokenLogger, Tiny, trainer


class StopsMidWindow(Tiny):
    """Raises (or sends itself SIGINT) at step 2 of epoch 0, inside a profiler window."""

    def __init__(self, how: str) -> None:
        super().__init__()
        self.how = how

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        if self.current_epoch == 0 and batch_idx == 2:
            if self.how == "sigint":
                os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C: Python raises KeyboardInterrupt here
            elif self.how == "interrupt":
                raise KeyboardInterrupt
            else:
                raise RuntimeError("stop here")
        return super().training_step(batch, batch_idx)


def export_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("perfkit-trace-export")]


@pytest.mark.parametrize(
    ("how", "surfaces_as"), [("error", RuntimeError), ("interrupt", SystemExit), ("sigint", SystemExit)]
)
def test_an_interrupted_fit_writes_lists_and_joins_its_trace(
    tmp_path: Path, how: str, surfaces_as: type[BaseException]
) -> None:
    run_dir = tmp_path / "run"
    callback = ProfilerCallback(
        profile_epochs=[0], profile_steps=5, warmup_steps=0, run_dir=str(run_dir), console=False
    )
    monitor = PerfMonitor(run_dir=str(run_dir), sample_resources=False)
    with perfkit.use_registry(perfkit.Registry()), pytest.raises(surfaces_as):
        trainer(str(tmp_path), [monitor, callback], logger=False, max_epochs=1).fit(StopsMidWindow(how))
    written = sorted((run_dir / "traces").glob("*.pt.trace.json.gz"))
    assert [p.name for p in written] == ["train_epoch0.pt.trace.json.gz"]
    listed = read_run(run_dir).traces
    assert [(t.stage, t.epoch, t.trace.name) for t in listed] == [
        ("train", 0, "train_epoch0.pt.trace.json.gz")
    ]
    assert listed[0].analysis is not None
    assert export_threads() == []
    assert callback.traces == written


def test_a_failing_logger_never_crashes_a_fit_whose_warnings_are_errors(tmp_path: Path) -> None:
    monitor = PerfMonitor(sample_resources=False, save_run=False)
    t = trainer(str(tmp_path), [monitor], logger=BrokenLogger(), max_epochs=2)
    with warnings.catch_warnings(), perfkit.use_registry(perfkit.Registry()):
        warnings.simplefilter("error", perfkit.PerfkitWarning)  # as `pytest -W error` does
        t.fit(Tiny())
    assert t.current_epoch == 2
    assert monitor.last_metrics["train"]["perf/train/steps"] == 8
