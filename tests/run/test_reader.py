"""read_run: a run directory read back and checked; broken files are named, a killed run still reads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import perfkit
from perfkit._cli import main
from perfkit._formats import ANALYSIS_FORMAT, RUN_FORMAT, SNAPSHOT_FORMAT, FormatError
from perfkit.run import read_run
from tests.conftest import FakeClock
from tests.run.run_dirs import synthetic_run


@pytest.fixture
def run_dir(tmp_path: Path, clock: FakeClock, reg: perfkit.Registry) -> Path:
    return synthetic_run(tmp_path / "run", clock, reg, epochs=2, trace=True)


def lines(run_dir: Path) -> list[str]:
    return (run_dir / "windows.jsonl").read_text().splitlines(keepends=True)


def test_windows_traces_and_the_final_snapshot_are_read(run_dir: Path) -> None:
    run = read_run(run_dir)
    assert [(w.stage, w.epoch, w.step) for w in run.windows] == [
        ("train", 0, 0),
        ("val", 0, 1),
        ("train", 1, 2),
        ("val", 1, 3),
    ]
    val = run.windows[1]
    assert val.samples == 16
    assert val.wall_s == pytest.approx(0.060)
    assert val.metric("data_wait_fraction") == pytest.approx(0.8)
    assert val.snapshot["val.step"].count == 4
    assert val.end_ns - val.start_ns == 60_000_000
    assert [s.duration_s for s in run.windows[2].slowest][:1] == [pytest.approx(0.0045)]
    assert [(t.stage, t.epoch, t.trace.name) for t in run.traces] == [
        ("train", 1, "train_epoch1.pt.trace.json.gz")
    ]
    analysis = run.traces[0].analysis
    assert analysis is not None
    assert analysis.step_count > 0
    assert val.window.account.seconds("data_wait") == pytest.approx(0.048)
    assert run.final is not None
    assert run.final["train.step"].count == 16
    assert run.meta["meta"] == {"script": "synthetic"}
    assert run.problems == ()


def test_metrics_are_found_under_the_prefix_the_run_recorded(run_dir: Path) -> None:
    text = (run_dir / "windows.jsonl").read_text().replace('"perf/', '"lightning/perf/')
    text = text.replace('"prefix": "perf"', '"prefix": "lightning/perf"')
    (run_dir / "windows.jsonl").write_text(text)
    assert read_run(run_dir).windows[0].metric("steps") == 8.0


def test_each_file_carries_the_format_it_is_written_in(run_dir: Path) -> None:
    assert json.loads((run_dir / "run.json").read_text())["format"] == RUN_FORMAT == perfkit.run.FORMAT
    for snapshot in (run_dir / "final.json", *(run_dir / "windows").iterdir()):
        assert json.loads(snapshot.read_text())["format"] == SNAPSHOT_FORMAT
    (trace,) = (run_dir / "traces.jsonl").read_text().splitlines()
    assert json.loads(trace)["summary"]["format"] == ANALYSIS_FORMAT


def test_a_file_of_a_newer_format_refuses_the_run_in_one_line_naming_it(
    run_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    newer = "(a newer perfkit wrote it: upgrade perfkit)"
    run_json = run_dir / "run.json"
    info = json.loads(run_json.read_text())
    run_json.write_text(json.dumps({**info, "format": RUN_FORMAT + 1}))
    said = f"{run_json} is format {RUN_FORMAT + 1}; this perfkit reads format {RUN_FORMAT} {newer}"
    with pytest.raises(FormatError) as refused:
        read_run(run_dir)
    assert str(refused.value) == said
    assert main(["summary", str(run_dir)]) == 2
    assert capsys.readouterr().err == f"perfkit: error: {said}\n"
    run_json.write_text(json.dumps(info))

    final = run_dir / "final.json"
    final.write_text(json.dumps({**json.loads(final.read_text()), "format": 99}))
    with pytest.raises(FormatError) as refused:
        read_run(run_dir)
    assert str(refused.value) == f"{final}: the snapshot is format 99; this perfkit reads format 1 {newer}"
    final.unlink()

    trace = run_dir / "traces.jsonl"
    line = json.loads(trace.read_text())
    line["summary"]["format"] = 2
    trace.write_text(json.dumps(line) + "\n")
    with pytest.raises(FormatError) as refused:
        read_run(run_dir)
    where = f"the trace analysis of {run_dir / 'traces.jsonl'} line 1"
    assert str(refused.value) == f"{where} is format 2; this perfkit reads format 1 {newer}"


def test_a_run_json_without_a_format_number_is_left_out_and_the_rest_reads(run_dir: Path) -> None:
    info = json.loads((run_dir / "run.json").read_text())
    del info["format"]
    (run_dir / "run.json").write_text(json.dumps(info))
    run = read_run(run_dir)
    assert "run.json has no format number (not perfkit's): its metadata is left out" in run.problems
    assert (run.meta, len(run.windows)) == ({}, 4)


def test_a_missing_directory_is_named(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=f"run directory {tmp_path / 'nope'} does not exist"):
        read_run(tmp_path / "nope")


def test_a_run_with_no_window_yet_reads_empty_and_says_so(run_dir: Path) -> None:
    (run_dir / "windows.jsonl").unlink()
    run = read_run(run_dir)
    assert run.windows == ()
    assert "windows.jsonl is missing: no window of this run finished" in run.problems


def test_a_directory_that_is_not_a_run_is_an_error_naming_the_file(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"windows\.jsonl is missing: .* not a perfkit run directory"):
        read_run(tmp_path)


def test_a_corrupt_line_in_the_middle_is_skipped_and_listed(run_dir: Path) -> None:
    text = lines(run_dir)
    text[1] = text[1][:40] + "\n"
    (run_dir / "windows.jsonl").write_text("".join(text))
    run = read_run(run_dir)
    assert [(w.stage, w.epoch) for w in run.windows] == [("train", 0), ("train", 1), ("val", 1)]
    assert run.problems[0] == "windows.jsonl line 2 is torn or not JSON (a write cut short?): skipped"


def test_a_line_without_a_required_field_is_skipped_naming_the_field(run_dir: Path) -> None:
    text = lines(run_dir)
    line = json.loads(text[0])
    del line["epoch"]
    text[0] = json.dumps(line) + "\n"
    (run_dir / "windows.jsonl").write_text("".join(text))
    run = read_run(run_dir)
    assert len(run.windows) == 3
    assert "windows.jsonl line 1: 'epoch' is missing or not an integer (got None): skipped" in run.problems


def test_a_missing_snapshot_file_skips_its_window_naming_it(run_dir: Path) -> None:
    (run_dir / "windows" / "val_epoch0.json").unlink()
    run = read_run(run_dir)
    assert [(w.stage, w.epoch) for w in run.windows] == [("train", 0), ("train", 1), ("val", 1)]
    assert any("the snapshot of val epoch 0, windows/val_epoch0.json, is missing" in p for p in run.problems)


def test_a_corrupt_snapshot_or_final_file_is_listed_and_the_rest_reads(run_dir: Path) -> None:
    (run_dir / "final.json").write_text('{"format": 1, "series"')
    run = read_run(run_dir)
    assert run.final is None
    assert len(run.windows) == 4
    assert any(p.startswith("final.json: snapshot: not JSON") for p in run.problems)
    (run_dir / "final.json").write_text('{"series": {}}')
    assert "final.json: the snapshot is not perfkit's: no format number (format=None): skipped" in (
        read_run(run_dir).problems
    )


def test_a_killed_run_reads_up_to_its_last_complete_window(run_dir: Path) -> None:
    text = lines(run_dir)
    (run_dir / "windows.jsonl").write_text("".join(text[:3]) + text[3][:60])  # killed mid-write
    (run_dir / "final.json").unlink()
    run = read_run(run_dir)
    assert [(w.stage, w.epoch) for w in run.windows] == [("train", 0), ("val", 0), ("train", 1)]
    assert run.final is None
    assert run.problems == (
        "windows.jsonl line 4 is truncated (the run was killed): skipped",
        "final.json is missing: the run did not finish (killed, or still running)",
    )
