"""A disk that fills mid-run and then frees space (issue 14, items 12 and 13), on a real full
disk: a 1 MB tmpfs mounted for the test (skipped where mounting is not allowed).

What was written before is never lost, a line cut short is never glued to the next, the
reader skips and lists it, the windows the full disk cost are listed as missing, and the
warning says "no space left on device".
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import subprocess
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

import perfkit
from perfkit import PerfkitWarning
from perfkit.reports import write_html_report
from perfkit.run import RunWriter, read_run
from tests.conftest import FakeClock
from tests.run.run_dirs import MS, SlowLoader

window = functools.partial(perfkit.window, console=False)
"""perfkit.window, without its console block."""

PAGE = 4096


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[Path]:
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def fill(disk: Path) -> Path:
    """Fill ``disk`` until the kernel says ENOSPC; returns the filler file."""
    filler = disk / "filler"
    with open(filler, "wb", buffering=0) as fh, contextlib.suppress(OSError):
        while True:
            fh.write(b"\0" * PAGE)
    return filler


def free_pages(filler: Path, pages: int) -> None:
    os.truncate(filler, max(0, filler.stat().st_size - pages * PAGE))


def epoch(e: int, run: RunWriter, reg: perfkit.Registry, clock: FakeClock) -> perfkit.monitor.ScriptWindow:
    with window("train", epoch=e, run=run, registry=reg) as w:
        for _ in w.iterate(SlowLoader(clock, batches=4, size=2, wait_ns=MS)):
            clock.advance(2 * MS)
    return w


def test_windows_lost_to_a_full_disk_are_said_in_words_listed_and_the_rest_reads(
    disk: Path, clock: FakeClock, reg: perfkit.Registry, caplog: pytest.LogCaptureFixture
) -> None:
    run = RunWriter(disk / "run")
    epoch(0, run, reg, clock)
    filler = fill(disk)
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        epoch(1, run, reg, clock)
        epoch(2, run, reg, clock)
    filler.unlink()
    epoch(3, run, reg, clock)
    run.finish(reg.snapshot())
    data = read_run(disk / "run")
    assert [w.epoch for w in data.windows] == [0, 3]
    lost = [p for p in data.problems if "not written" in p]
    assert len(lost) == 2
    assert lost[0].startswith("train epoch 1: not written (no space left on device")
    assert data.final is not None
    findings = write_html_report(disk / "run", disk / "report.html").read_text()
    assert "train epoch 2: not written (no space left on device" in findings
    messages = [str(w.message) for w in said if issubclass(w.category, PerfkitWarning)]
    assert len(messages) == 1
    assert "no space left on device" in messages[0]
    assert "train epoch 1 was not written to" in caplog.text  # each lost window on the console


def test_a_run_started_on_a_full_disk_writes_its_windows_once_space_is_freed(
    disk: Path, clock: FakeClock, reg: perfkit.Registry
) -> None:
    filler = fill(disk)
    with pytest.warns(PerfkitWarning, match="cannot write run.json .*: no space left on device"):
        run = RunWriter(disk / "run")
    filler.unlink()
    epoch(0, run, reg, clock)
    assert [w.epoch for w in read_run(disk / "run").windows] == [0]


def test_a_line_cut_short_by_a_full_disk_is_never_glued_to_the_next(
    disk: Path, clock: FakeClock, reg: perfkit.Registry
) -> None:
    run = RunWriter(disk / "run")
    first = epoch(0, run, reg, clock)
    assert first.window is not None
    big = {f"perf/train/metric_{i:05d}": float(i) for i in range(6000)}  # a line of about 200 KB
    filler = fill(disk)
    free_pages(filler, 4)  # room for the window's snapshot, not for its line
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run.add_window(first.window, big, step=1)
    filler.unlink()
    epoch(1, run, reg, clock)
    lines = (disk / "run" / "windows.jsonl").read_text().splitlines()
    assert [json.loads(x)["epoch"] for x in lines] == [0, 1]  # every line whole, none glued
    data = read_run(disk / "run")
    assert [w.epoch for w in data.windows] == [0, 1]
    assert any(p.startswith("train epoch 0: not written (no space left on device") for p in data.problems)


def test_a_torn_last_line_left_by_a_killed_writer_is_cut_off_before_the_next_line(
    tmp_path: Path, clock: FakeClock, reg: perfkit.Registry
) -> None:
    run = RunWriter(tmp_path / "run")
    epoch(0, run, reg, clock)
    with open(tmp_path / "run" / "windows.jsonl", "ab") as fh:
        fh.write(b'{"stage": "train", "epoch": 1, "wal')  # what a kill mid-write leaves
    epoch(1, run, reg, clock)
    lines = (tmp_path / "run" / "windows.jsonl").read_text().splitlines()
    assert [json.loads(x)["epoch"] for x in lines] == [0, 1]
