"""ProfilerWindows in a plain loop: torch.profiler windows on chosen stage epochs and steps."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest
import torch

import perfkit
from perfkit.torch import ProfilerWindows
from perfkit.trace import analyze_trace


def steps_in(trace: Path) -> list[str]:
    with gzip.open(trace, "rt") as fh:
        events = json.load(fh)["traceEvents"]
    return sorted(e["name"] for e in events if e.get("name", "").startswith("ProfilerStep#"))


def epoch(stage: str, e: int, windows: ProfilerWindows, reg: perfkit.Registry, batches: int = 6) -> None:
    with perfkit.window(stage, epoch=e, registry=reg, listeners=[windows]) as w:
        for batch in w.iterate([np.ones((4, 8), dtype=np.float32)] * batches):
            with perfkit.section("forward", registry=reg):
                torch.from_numpy(batch).sum()


def test_a_window_records_the_asked_steps_of_the_asked_epoch(tmp_path: Path) -> None:
    windows = ProfilerWindows(
        output_dir=tmp_path, epochs=[1], stages=["train"], profile_steps=3, warmup_steps=1
    )
    reg = perfkit.Registry()
    for e in range(3):
        epoch("train", e, windows, reg)
    windows.close()
    done = windows.results()
    assert [job.path.name for job, _ in done] == ["train_epoch1.pt.trace.json.gz"]
    assert steps_in(tmp_path / "train_epoch1.pt.trace.json.gz") == [
        "ProfilerStep#1",
        "ProfilerStep#2",
        "ProfilerStep#3",
    ]
    assert "forward" in {s.name for s in analyze_trace(done[0][0].path).sections}


def test_a_window_too_long_for_the_epoch_is_shortened_and_said(tmp_path: Path) -> None:
    windows = ProfilerWindows(output_dir=tmp_path, stages=["val"], profile_steps=20, warmup_steps=1)
    windows.begin("val", 0, total_steps=4)
    for i in range(4):
        windows.step("val", i)
    windows.end("val")
    windows.close()
    assert windows.notes == ["val epoch 0 has 4 steps: the window is shortened to steps 1-3"]
    assert steps_in(tmp_path / "val_epoch0.pt.trace.json.gz") == [
        "ProfilerStep#1",
        "ProfilerStep#2",
        "ProfilerStep#3",
    ]


def test_another_stage_starting_closes_the_window_and_nothing_is_overwritten(tmp_path: Path) -> None:
    windows = ProfilerWindows(output_dir=tmp_path, stages=["train"], profile_steps=50, warmup_steps=0)
    for _ in range(2):  # the same epoch twice into the same folder: the second trace gets a number
        windows.begin("train", 0)
        windows.step("train", 0)
        windows.begin("val", 0)  # validation inside the training epoch: the train window ends here
        assert not torch.autograd.profiler._is_profiler_enabled
        windows.end("val")
        windows.end("train")
    windows.close()
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["train_epoch0.pt.trace.json.gz", "train_epoch0_2.pt.trace.json.gz"]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"stages": "train"}, "stages must be a list of stage names, got 'train'"),
        ({"epochs": 3}, "profile_epochs must be a list"),
        ({"top_k": 0}, r"top_k must be an int in \[1, 10,000\], got 0"),
        ({"activities": "cpu"}, "activities must be a list such as"),
    ],
)
def test_bad_arguments_name_the_parameter(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises((TypeError, ValueError), match=message):
        ProfilerWindows(**kwargs)  # type: ignore[arg-type]
