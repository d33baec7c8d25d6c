"""PerfkitCallback on a real Hugging Face Trainer (a tiny BERT built from a config, on CPU, no network).

Truth comes from the test's own clock (``hf_job.Clock``: each training epoch's wall time and the
planted collate's time inside it), never from perfkit's output.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from perfkit.findings import diagnose
from perfkit.names import RUN_DIR_NAME, fetch_series
from perfkit.run import read_run
from perfkit.stages import Intervals

from .hf_job import SlowCollate, dataset, trainer

HERE = Path(__file__).parent


def test_the_data_wait_of_a_slow_collate_is_its_share_of_each_epoch_by_the_tests_own_clock(
    tmp_path: Path,
) -> None:
    t, clock, _ = trainer(tmp_path, sleep_s=0.02)
    t.train()
    run = read_run(tmp_path / RUN_DIR_NAME)
    train = [w for w in run.windows if w.stage == "train"]
    assert [w.epoch for w in train] == [0, 1]
    for w, (wall_s, collate_s) in zip(train, clock.epochs, strict=True):
        assert w.metric("time/data_wait_fraction") == pytest.approx(collate_s / wall_s, abs=0.05)
        assert w.metric("steps") == 16  # 64 samples in batches of 4
    assert [w.epoch for w in run.windows if w.stage == "val"] == [0, 1]  # eval_strategy="epoch"
    logged = [h for h in t.state.log_history if "perf/train/data_wait_fraction" in h]
    assert len(logged) == 2  # through Trainer.log: every report_to tracker gets them
    assert (tmp_path / RUN_DIR_NAME / "verdicts.json").exists()


def test_with_gradient_accumulation_a_step_is_a_micro_batch_and_optimizer_steps_are_counted_apart(
    tmp_path: Path,
) -> None:
    t, _, perf = trainer(tmp_path, sleep_s=0.0, accumulate=4, epochs=1)
    t.train()
    metrics = perf.monitor.last_metrics["train"] if perf.monitor else {}
    assert metrics["perf/train/steps"] == 16
    assert metrics["perf/train/optimizer_steps"] == 4
    assert t.state.global_step == 4  # the Trainer agrees


def test_records_made_in_the_trainers_dataloader_workers_reach_the_run(tmp_path: Path) -> None:
    t, _, _ = trainer(tmp_path, sleep_s=0.005, workers=2, epochs=1)
    t.train()
    (window,) = [w.window for w in read_run(tmp_path / RUN_DIR_NAME).windows if w.stage == "train"]
    fetch = window.snapshot.get(fetch_series("train"))
    assert fetch is not None
    assert fetch.count == 16  # one per batch, each made in a worker


def test_a_run_on_max_steps_is_cut_into_interval_windows_as_a_script_is(tmp_path: Path) -> None:
    """One pass on max_steps is step-based: after 10 warm-up steps, an interval every 20 steps,
    logged through Trainer.log at the global step, as perfkit.window cuts a script's stream."""
    t, _, _ = trainer(tmp_path, sleep_s=0.0, samples=256, max_steps=50, interval_steps=20)
    t.train()
    intervals = read_run(tmp_path / RUN_DIR_NAME).intervals
    assert [x.steps for x in intervals] == [(10, 29), (30, 49)]
    logged = [h for h in t.state.log_history if "perf/interval/train/steps" in h]
    assert [h["perf/interval/train/steps"] for h in logged] == [20, 20]


def test_a_slower_collate_from_a_planted_step_of_a_max_steps_run_is_a_change_from_that_step(
    tmp_path: Path, record_property: Any
) -> None:
    """The default plan, 16 times faster (a first interval of 18 steps, then 36, 72...): each batch
    takes 5 ms to collate, 20 ms from the 100th; the change is called in the interval it began in."""
    planted, default = 100, Intervals()
    scaled = Intervals(
        first_s=default.first_s / 16, first_steps=default.first_steps // 16, steady_s=default.steady_s / 16
    )
    t, _, _ = trainer(
        tmp_path, samples=4 * 220, max_steps=220, collate=SlowCollate(0.005, planted, 0.02), intervals=scaled
    )
    t.train()
    intervals = read_run(tmp_path / RUN_DIR_NAME).intervals
    # the planted part's changes (the step's own time may move too on a machine other work shares)
    called = [
        (x.steps, v) for x in intervals for v in x.verdicts if (v.kind, v.subject) == ("CHANGE", "data_wait")
    ]
    assert called, [(x.steps, x.verdicts) for x in intervals]
    (first, last), change = called[0]
    record_property("change", (first, last, change.evidence["start_step"]))
    assert abs(change.evidence["start_step"] - planted) <= last - first + 1  # within the interval's steps
    assert change.evidence["after_s"] > 2.5 * change.evidence["before_s"]  # 20 ms against 5 ms a batch
    assert last >= planted - 1  # none before it


def test_accelerates_look_ahead_is_no_epoch_boundary_and_the_advice_names_a_worker_count(
    tmp_path: Path,
) -> None:
    """accelerate fetches one batch ahead: timed around its loader, an epoch's first wait held two
    batches' making, and EPOCH_BOUNDARY claimed one batch's production. Timed at torch's iterator,
    each wait is one batch's: the first batch costs what the others do (the planted 20 ms)."""
    t, _, _ = trainer(tmp_path, sleep_s=0.02, epochs=2)
    t.train()
    run = read_run(tmp_path / RUN_DIR_NAME)
    for line in run.windows:
        account = line.window.account
        assert account.first_batch_extra_s is not None
        assert account.first_batch_extra_s < 0.005, (line.stage, line.epoch)  # not a 20 ms batch
    d = diagnose(run)
    assert "EPOCH_BOUNDARY" not in [v.kind for v in d.verdicts]
    top = d.verdicts[0]
    assert top.kind == "INPUT_BOUND"
    assert top.change.get("num_workers", 0) > 0  # the loader's settings were read at torch's iterator


def test_predict_is_its_own_stage(tmp_path: Path) -> None:
    t, _, perf = trainer(tmp_path, sleep_s=0.0, epochs=1)
    t.predict(dataset(24))
    metrics = perf.monitor.last_metrics["predict"] if perf.monitor else {}
    assert metrics["perf/predict/steps"] == 3  # 24 samples in batches of 8
    assert metrics["perf/predict/samples"] == 24


def test_perfkit_summary_reads_the_output_dir(tmp_path: Path) -> None:
    t, _, _ = trainer(tmp_path, sleep_s=0.01, epochs=1)
    t.train()
    done = subprocess.run(
        [sys.executable, "-m", "perfkit", "summary", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "INPUT_BOUND" in done.stdout


@pytest.mark.slow
def test_under_accelerate_launch_two_processes_are_merged_and_each_rank_is_right(tmp_path: Path) -> None:
    launcher = shutil.which("accelerate", path=str(Path(sys.executable).parent)) or "accelerate"
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_"))
    }
    two = ["--multi_gpu", "--num_processes", "2", "--num_machines", "1"]  # gloo on CPU: use_cpu=True
    plain = ["--mixed_precision", "no", "--dynamo_backend", "no"]
    command = [launcher, "launch", *two, *plain, str(HERE / "hf_job.py"), str(tmp_path)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=240, env=env, cwd=HERE)
    assert done.returncode == 0, done.stderr[-3000:]
    ranks = {r["rank"]: r for r in (json.loads(p.read_text()) for p in tmp_path.glob("truth_rank*.json"))}
    assert sorted(ranks) == [0, 1]
    (line,) = [w for w in read_run(tmp_path / RUN_DIR_NAME).windows if w.stage == "train"]
    merged = {r.rank: r for r in line.window.ranks}
    assert sorted(merged) == [0, 1]
    for rank, mine in ranks.items():
        ((wall_s, collate_s),) = mine["epochs"]
        account = merged[rank].account
        assert account.seconds("data_wait") / account.wall_s == pytest.approx(collate_s / wall_s, abs=0.05)
        assert 0 <= account.overlays["sync_wait"] < account.seconds("step")  # DDP's all-reduce, timed
    assert line.metric("steps") == 16  # 8 micro-batches on each of the two ranks
