"""A plain script's loop over a stream: interval windows to its sinks and a provisional block."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from pathlib import Path

import numpy as np
import pytest

import perfkit
from perfkit.run import RunWriter, read_run
from perfkit.stages import StageWindow


class Kept:
    def __init__(self) -> None:
        self.got: list[tuple[StageWindow, Mapping[str, float], int]] = []

    def emit(self, window: StageWindow, metrics: Mapping[str, float], step: int) -> None:
        self.got.append((window, metrics, step))

    def close(self) -> None:
        pass


def stream(n: int) -> Iterator[np.ndarray]:
    for _ in range(n):
        yield np.zeros((2, 4))


def test_a_script_over_a_stream_gets_the_same_intervals(tmp_path, caplog: pytest.LogCaptureFixture) -> None:
    kept, reg = Kept(), perfkit.Registry()
    run = RunWriter(tmp_path / "run")
    with (
        caplog.at_level(logging.INFO),
        perfkit.window("train", epoch=0, registry=reg, run=run, sinks=[kept], interval_steps=20) as w,
    ):
        for _ in w.iterate(stream(75)):
            pass
    intervals = [(x.steps, step) for x, _, step in kept.got if x.is_interval]
    assert intervals == [((10, 29), 29), ((30, 49), 49), ((50, 69), 69)]
    assert "perf/interval/train/step_ms_median" in kept.got[0][1]
    assert [x.is_interval for x, _, _ in kept.got][-1] is False  # the epoch window, at the end
    assert "steps 10-29 (provisional" in caplog.text
    assert [x.steps for x in read_run(tmp_path / "run").intervals] == [(10, 29), (30, 49), (50, 69)]


def test_a_script_over_a_list_is_not_cut_by_default() -> None:
    kept = Kept()
    with perfkit.window("train", epoch=0, registry=perfkit.Registry(), sinks=[kept], console=False) as w:
        for _ in w.iterate([np.zeros((2, 4))] * 75):
            pass
    assert [x.is_interval for x, _, _ in kept.got] == [False]


def one_epoch_in_intervals(path: Path) -> RunWriter:
    """A run directory at ``path`` with one training epoch of 75 steps cut every 20 (after 10)."""
    run = RunWriter(path)
    with perfkit.window(
        "train", epoch=0, registry=perfkit.Registry(), run=run, interval_steps=20, console=False
    ) as w:
        for _ in w.iterate(stream(75)):
            pass
    return run


def test_perfkit_summary_shows_the_runs_timeline(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    from perfkit._cli import main

    one_epoch_in_intervals(tmp_path / "run").finish(perfkit.snapshot())
    assert main(["summary", str(tmp_path / "run")]) == 0
    out = capsys.readouterr().out
    timeline = out[out.index("Timeline") :].splitlines()
    assert timeline[0] == "Timeline (3 interval windows; 0 not shown):"
    assert [line.split(":")[0].split()[-1] for line in timeline[1:4]] == ["10-29", "30-49", "50-69"]


def test_the_html_report_plots_the_timeline(tmp_path) -> None:
    from perfkit.reports import render_html

    one_epoch_in_intervals(tmp_path / "run")
    page = render_html(read_run(tmp_path / "run"), link_base=tmp_path)
    timeline = page[page.index("interval by interval") :]
    assert timeline.index("<svg") < timeline.index("</svg>")
