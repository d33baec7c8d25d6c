"""Two jobs, one run directory (issue 28): no window lost, none read as the other job's.

Two real processes are given the same run directory, as two array jobs or a re-launched job
with one config would be, and end each epoch's window at the same instant (``one_job.py``),
several times over, so their writes race on the same file names.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import perfkit
from perfkit._cli import main
from perfkit.run import RunWriter, read_run, this_job
from tests.conftest import FakeClock

window = functools.partial(perfkit.window, console=False)
"""perfkit.window, without its console block."""

ROUNDS, EPOCHS = 4, 3
SCRIPT = Path(__file__).with_name("one_job.py")
ROOT = Path(__file__).parents[2]


@pytest.fixture(scope="module")
def raced(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """``ROUNDS`` run directories, each written by jobs ``a`` and ``b`` at once; their job ids."""
    base = tmp_path_factory.mktemp("two_jobs")
    jobs = {
        tag: subprocess.Popen(
            [sys.executable, str(SCRIPT), tag, str(base), str(ROUNDS), str(EPOCHS)],
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},  # this checkout's perfkit
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for tag in ("a", "b")
    }
    deadline = time.monotonic() + 60
    while not all((base / f"{t}.ready").exists() for t in jobs) and time.monotonic() < deadline:
        time.sleep(0.01)
    (base / "go.tmp").write_text(str(time.time() + 0.1))
    (base / "go.tmp").rename(base / "go")
    ids = {}
    for tag, proc in jobs.items():
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        assert "not written" not in err, err
        assert "cannot write" not in err, err
        ids[tag] = out.strip()
    return base, ids


def test_every_window_of_both_jobs_is_read_back_as_its_own_jobs(
    raced: tuple[Path, dict[str, str]],
) -> None:
    base, ids = raced
    for r in range(ROUNDS):
        for tag, job in ids.items():
            run = read_run(base / f"run{r}", job=job)
            assert run.job == job
            assert [w.epoch for w in run.windows] == list(range(EPOCHS))
            for w in run.windows:  # its own records, never the other job's
                assert w.snapshot[f"{tag}.work"].count == 3
                assert all(not name.endswith(".work") or name == f"{tag}.work" for name in w.snapshot)
            assert run.final is not None
            assert run.final[f"{tag}.work"].count == 3 * EPOCHS
            assert [j.id for j in run.jobs] == sorted(ids.values(), key=[j.id for j in run.jobs].index)
            assert sum(j.windows for j in run.jobs) == 2 * EPOCHS
        files = list((base / f"run{r}").rglob("*.tmp"))
        assert files == []


def test_the_summary_reads_one_job_and_names_the_other(
    raced: tuple[Path, dict[str, str]], capsys: pytest.CaptureFixture[str]
) -> None:
    base, ids = raced
    run_dir = str(base / "run0")
    assert main(["summary", run_dir]) == 0
    out = capsys.readouterr().out
    assert f"({EPOCHS} windows: training)" in out.splitlines()[0]
    assert "this run directory holds 2 jobs" in out
    assert all(job in out for job in ids.values())
    for job in ids.values():
        assert main(["summary", run_dir, "--job", job, "--json"]) == 0
        data = json.loads(capsys.readouterr().out)
        assert data["job"] == job
        assert sorted(j["id"] for j in data["jobs"]) == sorted(ids.values())
        assert data["stages"]["train"]["epochs"] == EPOCHS


def test_writers_of_one_process_are_one_job(tmp_path: Path, reg: perfkit.Registry, clock: FakeClock) -> None:
    for stage in ("train", "test"):  # a trainer's test after its fit: a second writer, same process
        with window(stage, epoch=0, run=RunWriter(tmp_path), registry=reg) as w:
            for _ in w.iterate([1]):
                clock.advance(1_000_000)
    run = read_run(tmp_path)
    assert [w.stage for w in run.windows] == ["train", "test"]
    assert [j.id for j in run.jobs] == [this_job()]
    assert not any("jobs" in p for p in run.problems)


def two_jobs(tmp_path: Path, reg: perfkit.Registry, clock: FakeClock) -> dict[str, object]:
    """A window each of two jobs, as two processes would have written them: each line its own job,
    run.json both (the second with its own files' suffix). Returns run.json's content."""
    for _ in range(2):
        with window("train", epoch=0, run=RunWriter(tmp_path), registry=reg) as w:
            for _ in w.iterate([1]):
                clock.advance(1_000_000)
    lines = [json.loads(x) for x in (tmp_path / "windows.jsonl").read_text().splitlines()]
    info = json.loads((tmp_path / "run.json").read_text())
    (entry,) = info["jobs"].values()
    info["jobs"] = {}
    for pid, line in zip((101, 202), lines, strict=True):
        line["job"] = f"{pid}-ab12"
        info["jobs"][line["job"]] = {**entry, "pid": pid, "suffix": "" if pid == 101 else "_202-ab12"}
    (tmp_path / "windows.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    (tmp_path / "run.json").write_text(json.dumps(info))
    return info


def test_a_directory_two_jobs_wrote_is_read_one_job_at_a_time(
    tmp_path: Path, reg: perfkit.Registry, clock: FakeClock
) -> None:
    two_jobs(tmp_path, reg, clock)
    run = read_run(tmp_path)
    assert [(j.id, j.pid, j.windows) for j in run.jobs] == [("101-ab12", 101, 1), ("202-ab12", 202, 1)]
    assert run.job == "202-ab12"
    assert len(run.windows) == 1
    assert run.problems[0].startswith("this run directory holds 2 jobs")
    assert len(read_run(tmp_path, job="101").windows) == 1
    with pytest.raises(
        ValueError, match="job '303' is not a job of this run directory: its jobs are '101-ab12', '202-ab12'"
    ):
        read_run(tmp_path, job="303")


def test_final_json_is_nobodys_when_run_json_does_not_say_which_job_wrote_it(
    tmp_path: Path, reg: perfkit.Registry, clock: FakeClock
) -> None:
    info = two_jobs(tmp_path, reg, clock)
    (tmp_path / "final.json").write_text(reg.snapshot().to_json())
    (tmp_path / "run.json").write_text(json.dumps({**info, "jobs": {}}))  # a run.json that lost its jobs
    run = read_run(tmp_path)
    assert [j.pid for j in run.jobs] == [None, None]
    assert run.final is None
    assert any(
        p.startswith("final.json is left out: run.json does not say which of the jobs") for p in run.problems
    )
    assert "not listed in run.json" in run.problems[0]
