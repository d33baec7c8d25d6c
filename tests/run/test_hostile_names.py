"""Names never become paths, readers stay inside the run directory (issue 14, item 9), and every
output prints a name on its line, whatever it holds (issue 28)."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import pytest

import perfkit
from perfkit._cli import main
from perfkit.names import NAME_WIDTH, display_name
from perfkit.reports import summary_text, write_html_report
from perfkit.run import RunWriter, read_run
from tests.conftest import FakeClock

window = functools.partial(perfkit.window, console=False)
"""perfkit.window, without its console block."""


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


HOSTILE = [
    "line\nbreak",
    "carriage\rreturn",
    "nul\x00byte",
    "tab\tbed",
    "שלום \u202eevil",
    "rocket 🚀",
    "../../escape",
    "%s%d{}",
    "<script>alert(1)</script>",
    "x" * 10_000,
]


def hostile_run(run_dir: Path, reg: perfkit.Registry, clock: FakeClock) -> None:
    """Two epochs of a stage named with each hostile name, its only section named the same (three
    steps of 20 ms: the least a diagnosis judges)."""
    run = RunWriter(run_dir)
    for epoch in range(2):
        for name in HOSTILE:
            with window(name, epoch=epoch, run=run, registry=reg) as w:
                for _ in w.iterate([1, 2, 3]):
                    with perfkit.section(name, registry=reg):
                        clock.advance(20_000_000)
    run.finish(reg.snapshot())


def test_hostile_names_keep_every_output_on_its_lines_and_json_exact(
    tmp_path: Path, reg: perfkit.Registry, clock: FakeClock, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = tmp_path / "run"
    hostile_run(run_dir, reg, clock)
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert all(p.is_relative_to(run_dir) for p in files)  # no name made a path of its own
    assert main(["summary", str(run_dir)]) == 0
    text = capsys.readouterr().out
    assert "\x00" not in text
    assert "\r" not in text
    assert "\u202e" not in text
    top = [line for line in text.splitlines() if line.startswith("TOP:")]
    assert len(top) == 1
    assert "\\u202eevil" in text
    assert all(len(line) < 1000 for line in text.splitlines())  # the 10,000 characters are elided
    tree = perfkit.report(read_run(run_dir).final)  # perfkit.report's text tree
    assert not any(c in tree for c in "\x00\r\u202e")
    assert not any(line.startswith(("break", "return", "bed")) for line in tree.splitlines())
    assert all(len(line) < 1000 for line in tree.splitlines())
    assert main(["summary", str(run_dir), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert set(data["stages"]) == set(HOSTILE)  # the exact names, round-tripped
    subjects = {v["subject"] for v in data["verdicts"] if v["kind"] == "SLOW_SECTION"}
    assert subjects <= set(HOSTILE)
    assert subjects


def test_hostile_names_in_the_report_page_and_the_console_block(
    tmp_path: Path, reg: perfkit.Registry, clock: FakeClock
) -> None:
    pytest.importorskip("matplotlib")
    run_dir = tmp_path / "run"
    hostile_run(run_dir, reg, clock)
    page = write_html_report(run_dir).read_text(encoding="utf-8")
    assert "\x00" not in page
    assert "<script>alert" not in page
    assert "&lt;script&gt;" in page
    assert "\\x00" in page
    run = read_run(run_dir)
    for w in run.windows:
        block = summary_text(w.window, w.metrics)
        assert "\x00" not in block
        assert "\r" not in block
        head, *rest = block.splitlines()  # the block's own lines, none broken by a name
        assert head.startswith("[perfkit] ")
        assert all(line.startswith("  ") and line[2:9].strip().isalpha() for line in rest)
        assert all(len(line) < 1000 for line in block.splitlines())


def test_display_name_is_one_line_and_leaves_readable_names_alone() -> None:
    for name in HOSTILE:
        shown = display_name(name)
        assert len(shown.splitlines()) == 1
        assert len(shown) <= NAME_WIDTH
        assert not any(c in shown for c in "\x00\r\n\t\u202e")
    assert display_name("שלום 🚀 ../x %s <b>") == "שלום 🚀 ../x %s <b>"
    assert display_name("x" * 10_000).count("…") == 1
    with pytest.raises(ValueError, match="width must be an int >= 2 or None, got 1"):
        display_name("x", width=1)
