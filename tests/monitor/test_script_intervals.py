"""A plain script's loop over a stream: interval windows to its sinks and a provisional block."""

from __future__ import annotations

import logging
import time
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
    assert intervals == [((10, 29), 29), ((30, 49), 49), ((50, 69), 69), ((70, 74), 74)]  # its end too
    assert "perf/interval/train/step_ms_median" in kept.got[0][1]
    assert [x.is_interval for x, _, _ in kept.got][-1] is False  # the epoch window, at the end
    assert "steps 10-29 (provisional" in caplog.text
    assert "steps 70-74 (the epoch's last)" in caplog.text
    assert [x.steps for x in read_run(tmp_path / "run").intervals] == [(10, 29), (30, 49), (50, 69), (70, 74)]


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
    assert timeline[0] == "Timeline (4 interval windows; 0 not shown):"
    assert [line.split(":")[0].split()[-1] for line in timeline[1:5]] == ["10-29", "30-49", "50-69", "70-74"]


def summary_timeline(path: Path, capsys: pytest.CaptureFixture[str]) -> list[str]:
    """The lines of ``perfkit summary``'s timeline of the run at ``path``."""
    from perfkit._cli import main

    assert main(["summary", str(path)]) == 0
    out = capsys.readouterr().out
    return out[out.index("Timeline") :].split("\n\n")[0].splitlines()


@pytest.mark.parametrize("every", [80, 30])
def test_the_interval_timeline_covers_every_step_of_the_epoch_its_trailing_ones_included(
    tmp_path, capsys: pytest.CaptureFixture[str], every: int
) -> None:
    # 501 steps cut every 80 (or 30) after a warm-up of 10: either way the last cut is after step
    # 489, and steps 490-500 are the epoch's last interval, not lost (a user's report: 331-501 of
    # 501 missing, "0 not shown"); at 30, most lines are not shown, and the count says how many
    run, ran = RunWriter(tmp_path / "run"), 0
    with perfkit.window(
        "train", epoch=0, registry=perfkit.Registry(), run=run, interval_steps=every, console=False
    ) as w:
        for _ in w.iterate(stream(501)):
            ran += 1
    run.finish(perfkit.snapshot())
    intervals = read_run(tmp_path / "run").intervals
    covered = [s for x in intervals for s in range(x.steps[0], x.steps[1] + 1)]
    assert covered == list(range(10, ran))  # every step after the warm-up, once, in order
    timeline = summary_timeline(tmp_path / "run", capsys)
    shown = [line.split(":")[0].split()[-1] for line in timeline[1:]]
    hidden = len(intervals) - len(shown)
    assert timeline[0] == f"Timeline ({len(intervals)} interval windows; {hidden} not shown):"
    assert shown[0] == f"10-{9 + every}"
    assert shown[-1] == f"{10 + (ran - 10) // every * every}-{ran - 1}"  # the epoch's last step


def slow_to_end(n: int, end_s: float) -> Iterator[np.ndarray]:
    """``n`` batches, then ``end_s`` before saying it is done (a loader's workers shutting down)."""
    yield from stream(n)
    time.sleep(end_s)


def test_the_epochs_last_interval_is_not_judged_on_the_epochs_one_off_end(tmp_path) -> None:
    # steps 70-70 hold the loader's 50 ms end after a step of microseconds: judged as an interval
    # it read as INPUT_BOUND 96%, with a worker count to try (the epoch's window is judged instead)
    run = RunWriter(tmp_path / "run")
    with perfkit.window(
        "train", epoch=0, registry=perfkit.Registry(), run=run, interval_steps=20, console=False
    ) as w:
        for _ in w.iterate(slow_to_end(71, 0.05)):
            pass
    intervals = read_run(tmp_path / "run").intervals
    assert [x.steps for x in intervals][-1] == (70, 70)
    assert intervals[-1].verdicts == ()


def test_the_html_report_plots_the_timeline(tmp_path) -> None:
    from perfkit.reports import render_html

    one_epoch_in_intervals(tmp_path / "run")
    page = render_html(read_run(tmp_path / "run"), link_base=tmp_path)
    timeline = page[page.index("interval by interval") :]
    assert timeline.index("<svg") < timeline.index("</svg>")
