"""Names never become paths, and readers stay inside the run directory (issue 14, item 9)."""

from __future__ import annotations

import json
from pathlib import Path

import perfkit
from perfkit.run import RunWriter, read_run, window
from tests.conftest import FakeClock


def one_window(run_dir: Path, stage: str, reg: perfkit.Registry, clock: FakeClock) -> None:
    run = RunWriter(run_dir)
    with window(stage, epoch=0, run=run, registry=reg) as w:
        for _ in w.iterate([1, 2]):
            clock.advance(1_000_000)


def test_a_stage_named_like_a_path_writes_inside_the_run_and_reads_back(
    tmp_path: Path, reg: perfkit.Registry, clock: FakeClock
) -> None:
    run_dir = tmp_path / "a" / "b" / "run"
    for stage in ("../../../x", "val/holdout", "/etc/passwd"):
        one_window(run_dir, stage, reg, clock)
    files = {p.relative_to(tmp_path) for p in tmp_path.rglob("*") if p.is_file()}
    assert all(str(f).startswith("a/b/run/") for f in files)
    run = read_run(run_dir)
    assert [w.stage for w in run.windows] == ["../../../x", "val/holdout", "/etc/passwd"]
    assert [
        w.snapshot["val/holdout.step" if w.stage == "val/holdout" else f"{w.stage}.step"].count
        for w in run.windows
    ] == [2, 2, 2]


def test_the_reader_refuses_snapshot_paths_that_leave_the_run_directory(
    tmp_path: Path, reg: perfkit.Registry, clock: FakeClock
) -> None:
    run_dir = tmp_path / "run"
    one_window(run_dir, "val", reg, clock)
    one_window(run_dir, "train", reg, clock)
    outside = tmp_path / "secret.json"
    outside.write_text((run_dir / "windows" / "val_epoch0.json").read_text())  # a readable snapshot
    lines = [json.loads(x) for x in (run_dir / "windows.jsonl").read_text().splitlines()]
    lines[0]["snapshot"] = str(outside)  # absolute
    lines[1]["snapshot"] = "../secret.json"  # relative, up and out
    (run_dir / "windows.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    run = read_run(run_dir)
    assert run.windows == ()
    refused = [p for p in run.problems if "is outside the run directory (refused)" in p]
    assert len(refused) == 2
