"""ProfilerCallback: real torch.profiler windows around a tiny fit, only where they were asked for."""

from __future__ import annotations

import csv
import gzip
import json
from pathlib import Path
from typing import Any

import pytest
import torch
from lightning.pytorch.loggers import CSVLogger
from perfkit_lightning import ProfilerCallback

import perfkit
from perfkit._state import set_tracer
from perfkit.names import RUN_DIR_NAME

from .tiny import Tiny, said, trainer

PART_MARKS = {
    "perfkit.part.data_wait",
    "perfkit.part.forward",
    "perfkit.part.backward",
    "perfkit.part.optimizer",
}


def load(path: Path) -> dict[str, Any]:
    with gzip.open(path, "rt") as fh:
        data: dict[str, Any] = json.load(fh)
    return data


def names(trace: dict[str, Any]) -> set[str]:
    return {e["name"] for e in trace["traceEvents"] if "name" in e}


@pytest.fixture(scope="module")
def profiled(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[Path, ProfilerCallback, list[dict[str, str]], str]:
    """Three epochs; a window of 1 warm-up and 3 recorded steps on epoch 1, train and val."""
    root = tmp_path_factory.mktemp("profiled")
    callback = ProfilerCallback(
        profile_epochs=[1], profile_steps=3, warmup_steps=1, output_dir=str(root / "traces")
    )
    logger = CSVLogger(str(root))
    with perfkit.use_registry(perfkit.Registry()), said() as out:
        trainer(str(root), [callback], logger=logger, max_epochs=3).fit(Tiny())
    with open(Path(logger.log_dir) / "metrics.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    return root, callback, rows, out.text


def test_traces_exist_only_for_the_listed_epochs_and_stages(profiled: Any) -> None:
    root, callback, _, _ = profiled
    files = sorted(p.name for p in (root / "traces").iterdir())
    assert files == ["train_epoch1.pt.trace.json.gz", "val_epoch1.pt.trace.json.gz"]
    assert sorted(p.name for p in callback.traces) == files


def test_a_trace_is_valid_gzip_json_with_sections_part_marks_and_steps(profiled: Any) -> None:
    root, _, _, _ = profiled
    trace = load(root / "traces" / "train_epoch1.pt.trace.json.gz")
    seen = names(trace)
    assert seen >= PART_MARKS
    assert {"forward", "getitem"} <= seen  # the module's perfkit section, and the dataset's @timed
    assert trace["perfkit"] == {"sections": ["forward", "getitem"]}
    recorded = sorted(n for n in seen if n.startswith("ProfilerStep#"))
    assert recorded == ["ProfilerStep#1", "ProfilerStep#2", "ProfilerStep#3"]  # step 0 was the warm-up
    val = load(root / "traces" / "val_epoch1.pt.trace.json.gz")
    assert {"perfkit.part.data_wait", "perfkit.part.forward"} <= names(val)
    assert "perfkit.part.backward" not in names(val)


def test_the_summary_is_said_and_logged(profiled: Any) -> None:
    _, _, rows, printed = profiled
    assert "[Profiler] Trace exported:" in printed
    assert "[Profiler] Summary: data wait" in printed
    assert "[Profiler] Bottlenecks:" in printed
    logged = {k for r in rows for k, v in r.items() if v and "/profiler/" in k}
    assert {"perf/train/profiler/forward_fraction", "perf/val/profiler/data_wait_fraction"} <= logged


def test_the_run_directory_lists_the_traces(profiled: Any) -> None:
    root, _, _, _ = profiled
    (run,) = root.glob(f"**/{RUN_DIR_NAME}/traces.jsonl")
    lines = [json.loads(x) for x in run.read_text().splitlines()]
    assert {(x["stage"], x["epoch"]) for x in lines} == {("train", 1), ("val", 1)}
    assert all(x["summary"]["step_count"] == 3 for x in lines)


def test_outside_windows_nothing_is_wrapped_or_traced(profiled: Any) -> None:
    assert set_tracer(None) is None  # no tracer left behind
    model = Tiny()
    assert "training_step" not in vars(model)
    assert not torch.autograd.profiler._is_profiler_enabled


def test_repeat_really_repeats(tmp_path: Path) -> None:
    callback = ProfilerCallback(
        profile_epochs=[0], profile_steps=2, warmup_steps=1, wait=1, repeat=2, stages=("train",),
        output_dir=str(tmp_path / "traces"), console=False,
    )  # fmt: skip
    trainer(str(tmp_path), [callback], logger=False, max_epochs=1, limit_val_batches=0).fit(Tiny())
    files = sorted(p.name for p in (tmp_path / "traces").iterdir())
    assert files == ["train_epoch0_cycle1.pt.trace.json.gz", "train_epoch0_cycle2.pt.trace.json.gz"]
    for name in files:
        steps = sorted(n for n in names(load(tmp_path / "traces" / name)) if n.startswith("ProfilerStep#"))
        assert steps == ["ProfilerStep#1", "ProfilerStep#2"]


def test_an_unwritable_output_directory_is_a_warning_and_training_goes_on(tmp_path: Path) -> None:
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where the trace directory should be")
    callback = ProfilerCallback(
        profile_epochs=[0], profile_steps=2, warmup_steps=0, output_dir=str(blocked / "x")
    )
    t = trainer(str(tmp_path), [callback], logger=False, max_epochs=2, limit_val_batches=0)
    with pytest.warns(perfkit.PerfkitWarning, match="cannot write trace"):
        t.fit(Tiny())
    assert t.current_epoch == 2
    assert callback.traces == []


class FailsMidWindow(Tiny):
    def __init__(self, error: type[BaseException]) -> None:
        super().__init__()
        self.error = error

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        if self.current_epoch == 0 and batch_idx == 2:
            raise self.error("stop here")
        return super().training_step(batch, batch_idx)


@pytest.mark.parametrize(
    ("error", "surfaces_as"),
    [(RuntimeError, RuntimeError), (KeyboardInterrupt, SystemExit)],  # Lightning exits after Ctrl-C
)
def test_an_exception_or_interrupt_inside_a_window_stops_the_profiler_cleanly(
    tmp_path: Path, error: type[BaseException], surfaces_as: type[BaseException]
) -> None:
    callback = ProfilerCallback(
        profile_epochs=[0], profile_steps=5, warmup_steps=0, output_dir=str(tmp_path / "t")
    )
    model = FailsMidWindow(error)
    with pytest.raises(surfaces_as):
        trainer(str(tmp_path), [callback], logger=False, max_epochs=1).fit(model)
    assert not torch.autograd.profiler._is_profiler_enabled
    assert set_tracer(None) is None
    assert "training_step" not in vars(model)  # the part marks are unwrapped


def test_disabled_it_leaves_the_trainer(tmp_path: Path) -> None:
    callback = ProfilerCallback(enabled=False, output_dir=str(tmp_path / "t"))
    t = trainer(str(tmp_path), [callback], logger=False, max_epochs=1)
    t.fit(Tiny())
    assert callback not in t.callbacks  # type: ignore[attr-defined]
    assert not (tmp_path / "t").exists()


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        (
            {"profile_steps": 0},
            ValueError,
            r"active \(profile_steps\) must be an int in \[1, 1,000,000\], got 0",
        ),
        ({"warmup_steps": -1}, ValueError, r"warmup must be an int in \[0, 1,000,000\], got -1"),
        ({"repeat": 0}, ValueError, r"repeat must be an int in \[1, 1,000\], got 0"),
        ({"repeat": 10**8}, ValueError, r"repeat must be an int in \[1, 1,000\], got 100000000"),
        ({"profile_epochs": 1}, TypeError, "profile_epochs must be a list"),
        ({"profile_epochs": [-1]}, ValueError, "profile_epochs: epochs are ints >= 0, got -1"),
        ({"activities": ["tpu"]}, ValueError, "activities: unknown activity 'tpu'"),
        ({"stages": ["predict"]}, ValueError, "stages: unknown stage 'predict'"),
        ({"stages": "val"}, TypeError, "stages must be a list of stage names, got 'val'"),
        ({"log_top_k_ops": 0}, ValueError, "log_top_k_ops must be an int >= 1, got 0"),
        ({"max_trace_mb": 0}, ValueError, r"max_trace_mb must be a finite number in \(0, 100,000.0\], got 0"),
        ({"max_trace_mb": float("nan")}, ValueError, r"max_trace_mb must be a finite number .*, got nan"),
        ({"max_trace_mb": float("inf")}, ValueError, r"max_trace_mb must be a finite number .*, got inf"),
        ({"activities": "cpu"}, TypeError, "activities must be a list such as"),
        ({"activities": 5}, TypeError, "activities must be a list such as .* got 5"),
        ({"output_dir": 5}, TypeError, "output_dir must be a non-empty path or None, got 5"),
    ],
)
def test_bad_arguments_fail_at_construction(
    kwargs: dict[str, Any], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        ProfilerCallback(**kwargs)


def test_memory_stays_flat_over_many_windows(tmp_path: Path) -> None:
    """Every window's profiler session is released once its trace is written."""
    import gc

    callback = ProfilerCallback(
        profile_steps=2, warmup_steps=0, repeat=2, wait=1, stages=("train", "val"),
        output_dir=str(tmp_path / "t"), console=False,
    )  # fmt: skip
    trainer(str(tmp_path), [callback], logger=False, max_epochs=4).fit(Tiny())
    assert len(callback.traces) == 4 * 2 + 4 * 1  # train: 2 cycles per epoch; val (4 steps): 1
    assert len(set(callback.traces)) == len(callback.traces)  # each written once
    gc.collect()
    alive = [o for o in gc.get_objects() if isinstance(o, torch.profiler.profile)]
    assert alive == []
