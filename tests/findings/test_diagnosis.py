"""Diagnosis of a run directory: verdicts ranked by the share of the run they explain, a stable JSON,
rules that abstain without their inputs, and the summary and compare commands."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import perfkit
from perfkit._cli import main
from perfkit.findings import KINDS, RULES, Case, diagnose, diagnose_windows, judge
from perfkit.run import read_run
from tests.conftest import FakeClock
from tests.run.run_dirs import synthetic_run
from tests.stages.windows import stage_window

MS = 1_000_000


@pytest.fixture
def run_dir(tmp_path: Path, clock: FakeClock, reg: perfkit.Registry) -> Path:
    return synthetic_run(tmp_path / "run", clock, reg)


def test_verdicts_are_ranked_by_the_share_of_the_run_they_explain(run_dir: Path) -> None:
    d = diagnose(read_run(run_dir), cores=4)
    shares = [v.run_share for v in d.verdicts]
    assert shares == sorted(shares, reverse=True)
    top = d.verdicts[0]
    # validation's last epoch waits 48 of its 60 ms
    assert (top.kind, top.stage, top.share) == ("INPUT_BOUND", "val", pytest.approx(0.8))
    assert top.run_share == pytest.approx(0.8 * 180 / (180 + 132))  # the stage's part of the run
    assert {v.kind for v in d.verdicts} <= set(KINDS)


def test_the_json_is_the_documented_format(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["summary", str(run_dir), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert set(data) == {
        "format",
        "verdicts",
        "context",
        "abstained",
        "stages",
        "memory_peaks_mb",
        "lost",
        "changes",
        "problems",
        "job",
        "jobs",
    }
    assert data["format"] == 1
    fields = {
        "kind",
        "stage",
        "epoch",
        "subject",
        "share",
        "run_share",
        "severity",
        "message",
        "evidence",
        "action",
        "part",
        "context",
        "change",
        "gain",
        "run_gain",
    }
    assert all(set(v) == fields for v in data["verdicts"])
    assert set(data["stages"]) == {"train", "val"}
    val = data["stages"]["val"]
    assert sum(val["account_fraction"].values()) == pytest.approx(1.0)
    assert val["account_s"]["data_wait"] == pytest.approx(0.048)


def test_summary_finds_the_run_in_a_loggers_version_directory(
    tmp_path: Path, clock: FakeClock, reg: perfkit.Registry, capsys: pytest.CaptureFixture[str]
) -> None:
    synthetic_run(tmp_path / "version_0" / "perfkit", clock, reg)
    assert main(["summary", str(tmp_path / "version_0")]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[1].startswith("TOP: INPUT_BOUND")
    assert "Where the time went" in out


def test_summary_of_what_is_not_a_run_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["summary", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "windows.jsonl is missing" in err


def test_a_rule_without_its_inputs_abstains_and_says_which(clock: FakeClock, reg: perfkit.Registry) -> None:
    t = clock()
    clock.advance(10 * MS)
    reg.record("custom", t, clock())  # a window with no step, no loader, no samples
    window = stage_window("val", 0, reg.snapshot(), wall_s=0.01)
    case = Case(window, (), None, cores=2, stage_wall_s=0.01, run_wall_s=0.01)
    missing = {a.rule: a.missing for a in judge(case)[1]}
    assert "val.step" in missing["COMPUTE_BOUND"]
    assert "val.data.wait" in missing["INPUT_BOUND"]
    assert "training window" in missing["EVAL_SLOWER_THAN_TRAIN"]


def test_an_epoch_of_too_few_steps_or_too_short_is_not_judged(
    clock: FakeClock, reg: perfkit.Registry
) -> None:
    """One step in 4.8 ms (a crash on the first batch, a one-batch validation): each rule would
    judge one-off costs. The stage is judged on its last epoch with enough evidence, else not."""
    windows = []
    for epoch, steps in enumerate((20, 1)):
        since = reg.cursor()
        for _ in range(steps):
            t = clock()
            clock.advance(round(4.8 * MS))
            reg.record("val.step", t, clock())
        windows.append(stage_window("val", epoch, reg.snapshot(since=since), wall_s=0.0048 * steps))
    (only,) = diagnose_windows(windows[1:], cores=2).abstentions
    assert (only.rule, only.stage, only.epoch) == ("every rule", "val", 1)
    assert only.missing == "more than 1 step in 4.80 ms to judge (3 steps and 50.00 ms at least)"
    d = diagnose_windows(windows, cores=2)  # the first epoch holds enough: it is the one judged
    assert [(v.kind, v.epoch) for v in d.verdicts] == [("COMPUTE_BOUND", 0)]


def test_every_rule_documents_its_threshold() -> None:
    assert [r.kind for r in RULES] == list(KINDS)
    assert all(r.why and r.threshold > 0 and r.reads for r in RULES)
    doc = (Path(__file__).resolve().parents[2] / "docs" / "diagnosis.md").read_text()
    for rule in RULES:
        assert f"`{rule.kind}`" in doc, rule.kind


def test_a_regression_must_exceed_the_noise(clock: FakeClock, reg: perfkit.Registry) -> None:
    windows = []
    for epoch, (mean, spread) in enumerate([(10, 0), (10, 4), (11, 4), (20, 1)]):
        start = reg.cursor()
        for i in range(20):
            t = clock()
            clock.advance(int((mean + (spread if i % 2 else -spread)) * MS))
            reg.record("train.step", t, clock())
        windows.append(stage_window("train", epoch, reg.snapshot(since=start), wall_s=0.02 * 20 + 0.1))
    noisy = diagnose_windows(windows[:3], cores=2)  # 10 -> 11 ms inside a spread of +-4 ms: noise
    assert not any("got slower" in v.said for v in noisy.verdicts)
    grown = diagnose_windows([*windows[:2], windows[3]], cores=2)
    # the steps growing is said inside the step's verdict, the cause that owns those seconds
    (step,) = [v for v in grown.verdicts if v.part == "step"]
    assert (step.kind, step.context.split(":")[0]) == (
        "COMPUTE_BOUND",
        "training steps got slower from epoch 1 to 3",
    )
    assert "REGRESSION" not in {v.kind for v in grown.verdicts}


def test_report_finds_the_run_in_a_loggers_version_directory(
    tmp_path: Path, clock: FakeClock, reg: perfkit.Registry, capsys: pytest.CaptureFixture[str]
) -> None:
    synthetic_run(tmp_path / "version_0" / "perfkit", clock, reg)
    assert main(["report", str(tmp_path / "version_0")]) == 0
    assert capsys.readouterr().out.strip() == str(tmp_path / "version_0" / "perfkit" / "report.html")


def test_compare_says_when_time_moved_between_parts_instead_of_saving_nothing() -> None:
    from perfkit.findings import Comparison, PartChange

    wait = PartChange("train", "data_wait", 0.030, 0.006, 0.002)
    step = PartChange("train", "step", 0.010, 0.033, 0.002)
    c = Comparison("a", "b", (wait, step), (), (), "NO CHANGE", None, moved=(wait, step))
    assert c.line == (
        "NO CHANGE overall: train's data wait -24.00 ms/step moved into the step +23.00 ms/step: "
        "the workers compete with the model for cores"
    )
