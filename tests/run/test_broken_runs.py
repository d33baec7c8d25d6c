"""Broken run directories: the reader reads what it can and lists the rest, ``perfkit report``
never prints a traceback, and user text never reaches matplotlib's mathtext (issue 14, item 7)."""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

import perfkit
from perfkit._cli import main
from perfkit.run import RunWriter, read_run
from tests.conftest import FakeClock
from tests.run.run_dirs import synthetic_run

window = functools.partial(perfkit.window, console=False)
"""perfkit.window, without its console block."""


@pytest.fixture
def run_dir(tmp_path: Path, clock: FakeClock, reg: perfkit.Registry) -> Path:
    return synthetic_run(tmp_path / "run", clock, reg, epochs=2, trace=True)


def rewrite_line(run_dir: Path, n: int, change: Callable[[dict], None]) -> None:  # type: ignore[type-arg]
    lines = (run_dir / "windows.jsonl").read_text().splitlines()
    line = json.loads(lines[n])
    change(line)
    lines[n] = json.dumps(line)
    (run_dir / "windows.jsonl").write_text("\n".join(lines) + "\n")


def snapshot_file(run_dir: Path, name: str, text: str) -> None:
    (run_dir / "windows" / name).write_text(text)


def series_count_zero(run_dir: Path) -> None:
    data = json.loads((run_dir / "windows" / "val_epoch0.json").read_text())
    data["series"]["val.step"]["count"] = 0
    snapshot_file(run_dir, "val_epoch0.json", json.dumps(data))


BREAKAGES: dict[str, Callable[[Path], None]] = {
    "run.json left empty by a full disk": lambda d: (d / "run.json").write_text(""),
    "run.json a list": lambda d: (d / "run.json").write_text("[1, 2]"),
    "a metric past float's range": lambda d: rewrite_line(d, 0, lambda x: x["metrics"].update(big=10**400)),
    "a slowest step without its fields": lambda d: rewrite_line(d, 1, lambda x: x.update(slowest=[{"a": 1}])),
    "an account that is a list": lambda d: rewrite_line(d, 2, lambda x: x.update(account=[1])),
    "a NaN wall time": lambda d: rewrite_line(d, 3, lambda x: x.update(wall_s=float("nan"))),
    "a snapshot with a count of 0": series_count_zero,
    "a snapshot nested 100,000 deep": lambda d: snapshot_file(d, "train_epoch1.json", "[" * 100_000),
    "a trace summary of the wrong shape": lambda d: (d / "traces.jsonl").write_text(
        json.dumps({"stage": "train", "epoch": 1, "trace": "t.json", "summary": {"path": 5}}) + "\n"
    ),
    "bytes that are not UTF-8": lambda d: (d / "windows.jsonl").write_bytes(
        (d / "windows.jsonl").read_bytes() + b"\xff\xfe{\n"
    ),
}


TOLERATED = {"a trace summary of the wrong shape"}  # read as "not analysed"


@pytest.mark.parametrize("breakage", list(BREAKAGES))
def test_perfkit_report_on_a_broken_run_writes_the_report_and_lists_what_it_skipped(
    run_dir: Path, breakage: str, capsys: pytest.CaptureFixture[str]
) -> None:
    BREAKAGES[breakage](run_dir)
    rc = main(["report", str(run_dir)])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    assert (rc, err) == (0, "")
    assert out.strip() == str(run_dir / "report.html")
    run = read_run(run_dir)
    page = (run_dir / "report.html").read_text()
    assert ("Missing from this run" in page) is (breakage not in TOLERATED)
    assert len(run.windows) >= 3  # the rest of the run is still read


def test_a_path_that_is_not_a_run_is_one_line_and_exit_code_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["report", str(tmp_path)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.count("\n") == 1
    assert err.startswith("perfkit: error: ")


def test_an_empty_run_json_does_not_refuse_the_run(run_dir: Path) -> None:
    (run_dir / "run.json").write_bytes(b"")  # what a full disk leaves
    run = read_run(run_dir)
    assert len(run.windows) == 4
    assert run.meta == {}
    assert "run.json is empty (a write cut short): its metadata is left out" in run.problems


@pytest.mark.parametrize("stage", ["$\\frac{a$", "cost $5", "a$b$c$"])
def test_a_stage_named_like_mathtext_is_drawn_as_written(
    tmp_path: Path, clock: FakeClock, reg: perfkit.Registry, stage: str
) -> None:
    run_dir = tmp_path / "run"
    run = RunWriter(run_dir)
    for epoch in range(2):
        with window(stage, epoch=epoch, run=run, registry=reg) as w:
            for _ in w.iterate([1, 2, 3]):
                clock.advance(1_000_000)
                reg.gauge(f"{stage}_mb", 1.0)
    run.finish(reg.snapshot())
    assert main(["report", str(run_dir)]) == 0
    page = (run_dir / "report.html").read_text()
    assert page.count("<svg ") >= 3  # steps, time split, memory


def test_summary_and_compare_refuse_a_run_with_no_readable_window(
    run_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A broken run is not an empty one: exit 2 and the first problem, not 'nothing stands out'."""
    good = shutil.copytree(run_dir, run_dir.parent / "good")
    (run_dir / "windows.jsonl").write_text("garbage\n")
    capsys.readouterr()
    for argv in (
        ["summary", str(run_dir)],
        ["summary", str(run_dir), "--json"],
        ["compare", str(run_dir), str(good)],
    ):
        assert main(argv) == 2
        out, err = capsys.readouterr()
        assert (out, err.count("\n")) == ("", 1)
        assert "could be read: windows.jsonl line 1" in err


def test_summary_json_lists_what_it_skipped(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rewrite_line(run_dir, 0, lambda line: line.update(snapshot="windows/gone.json"))
    capsys.readouterr()
    assert main(["summary", str(run_dir), "--json"]) == 0
    problems = json.loads(capsys.readouterr().out)["problems"]
    assert len(problems) == 1
    assert "gone.json" in problems[0]


def test_compare_refuses_runs_with_no_stage_in_common(
    tmp_path: Path, clock: FakeClock, reg: perfkit.Registry, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = []
    for stage in ("train", "val"):
        run = RunWriter(tmp_path / stage)
        with window(stage, epoch=0, run=run, registry=reg) as w:
            for _ in w.iterate([1, 2]):
                clock.advance(1_000_000)
        runs.append(str(tmp_path / stage))
    assert main(["compare", *runs]) == 2
    assert "nothing to compare" in capsys.readouterr().err


def test_a_file_given_for_a_run_directory_is_named(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["summary", str(run_dir / "run.json")]) == 2
    assert "is a file" in capsys.readouterr().err


def test_a_reader_that_stops_early_is_not_an_error(run_dir: Path) -> None:
    """``perfkit summary RUN | head -1``: no 'Broken pipe' error, exit 0."""
    read, write = os.pipe()
    os.close(read)  # the reader is gone before the first line
    done = subprocess.run(
        [sys.executable, "-m", "perfkit", "summary", str(run_dir)],
        stdout=write,
        stderr=subprocess.PIPE,
        text=True,
    )
    os.close(write)
    assert done.stderr == ""
    assert done.returncode == 0
