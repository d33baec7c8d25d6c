"""ProfilerWindows in a plain script: names never become paths (issue 14, item 9), and a loop
interrupted inside a window still writes its trace and joins the export thread (item 10)."""

from __future__ import annotations

import functools
import threading
from pathlib import Path

import pytest
import torch

import perfkit
from perfkit.torch import ProfilerWindows

window = functools.partial(perfkit.window, console=False)
"""perfkit.window, without its console block."""


def export_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("perfkit-trace-export")]


def steps(stage: str, windows: ProfilerWindows, *, stop_at: int | None = None) -> None:
    with window(stage, epoch=0, registry=perfkit.Registry(), listeners=[windows]) as w:
        for i, x in enumerate(w.iterate([torch.ones(4, 4)] * 4)):
            if i == stop_at:
                raise KeyboardInterrupt
            torch.mm(x, x)


@pytest.mark.parametrize("stage", ["../../../escape", "a/b", "/abs", "..", "évaluation $x$"])
def test_a_stage_name_never_leads_a_trace_out_of_its_folder(tmp_path: Path, stage: str) -> None:
    out = tmp_path / "deep" / "er" / "traces"
    windows = ProfilerWindows(output_dir=out, stages=[stage], profile_steps=2, warmup_steps=1)
    try:
        steps(stage, windows)
    finally:
        windows.close()
    inside = sorted(p for p in out.rglob("*") if p.is_file())
    everywhere = sorted(p for p in tmp_path.rglob("*") if p.is_file())
    assert everywhere == inside
    assert [p.parent for p in inside] == [out]
    assert len(windows.results()) == 1  # written, and analysed


def test_a_loop_interrupted_inside_a_window_still_writes_its_trace_and_joins_the_thread(
    tmp_path: Path,
) -> None:
    with (
        pytest.raises(KeyboardInterrupt),
        ProfilerWindows(output_dir=tmp_path, stages=["train"], profile_steps=3, warmup_steps=0) as windows,
    ):
        steps("train", windows, stop_at=2)
    assert [p.name for p in tmp_path.iterdir()] == ["train_epoch0.pt.trace.json.gz"]
    done = windows.results()
    assert [job.path.name for job, _ in done] == ["train_epoch0.pt.trace.json.gz"]
    assert export_threads() == []
    assert not torch.autograd.profiler._is_profiler_enabled
