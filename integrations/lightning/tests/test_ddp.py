"""DDP for real: two CPU processes over gloo; epoch metrics describe both ranks, logged once by rank 0."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

import perfkit
from perfkit.names import RUN_DIR_NAME
from perfkit.trace import analyze_trace

from .jobs import run_job

JOB = Path(__file__).with_name("ddp_job.py")


@pytest.fixture(scope="module")
def ddp_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("ddp")
    run_job(JOB, out)
    return out


def rows(out: Path) -> list[dict[str, str]]:
    with open(out / "ddp" / "version_0" / "metrics.csv", newline="") as fh:
        return list(csv.DictReader(fh))


def values(run: Path, key: str) -> list[float]:
    return [float(r[key]) for r in rows(run) if r.get(key)]


def test_metrics_are_logged_once_per_epoch_and_cover_both_ranks(ddp_run: Path) -> None:
    # 32 training samples split over 2 ranks in batches of 4: 4 steps each, 8 in the merged epoch
    assert values(ddp_run, "perf/train/steps") == [8.0, 8.0]
    assert values(ddp_run, "perf/train/samples") == [32.0, 32.0]
    assert values(ddp_run, "perf/val/steps") == [4.0, 4.0]
    assert values(ddp_run, "perf/train/ranks") == [2.0, 2.0]


def test_the_slowest_rank_and_the_spread_of_mean_step_time(ddp_run: Path) -> None:
    assert values(ddp_run, "perf/val/slowest_rank") == [1.0, 1.0]
    assert all(v > 0 for v in values(ddp_run, "perf/val/step_ms_mean_rank_spread"))
    slowest = values(ddp_run, "perf/val/step_ms_mean_slowest_rank")
    assert all(s >= m for s, m in zip(slowest, values(ddp_run, "perf/val/step_ms_mean"), strict=True))
    assert len(values(ddp_run, "perf/train/step_ms_mean_rank_spread")) == 2


def test_percentiles_are_over_the_union_of_both_ranks_samples(ddp_run: Path) -> None:
    run_dir = ddp_run / "ddp" / "version_0" / RUN_DIR_NAME
    lines = [json.loads(x) for x in (run_dir / "windows.jsonl").read_text().splitlines()]
    train = next(x for x in lines if x["stage"] == "train")
    snap = perfkit.Snapshot.from_json((run_dir / train["snapshot"]).read_text())
    pids = {t.pid for t in snap.threads}
    assert len(pids) == 2  # samples of both processes
    assert snap["train.step"].n_samples == 8
    by_thread = snap.by_thread("train.step")
    assert sorted(s.count for s in by_thread.values()) == [4, 4]
    assert {s["rank"] for s in train["slowest"]} <= {0, 1}


def test_every_rank_profiles_the_same_steps(ddp_run: Path) -> None:
    traces = sorted(p.name for p in (ddp_run / "traces").iterdir())
    assert traces == ["train_epoch1_rank0.pt.trace.json.gz", "train_epoch1_rank1.pt.trace.json.gz"]
    for name in traces:
        analysis = analyze_trace(ddp_run / "traces" / name)
        assert analysis.step_count == 2
