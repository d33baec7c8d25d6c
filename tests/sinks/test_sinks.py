"""Sinks for real: a JSONL file read back, W&B offline, MLflow on a local SQLite store."""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import perfkit
from perfkit.reports import attach_report_to_wandb, log_report_to_mlflow
from perfkit.sinks import JsonlSink, MlflowSink, WandbSink
from tests.conftest import FakeClock
from tests.run.run_dirs import MS, SlowLoader

window = functools.partial(perfkit.window, console=False)
"""perfkit.window, without its console block."""

pytestmark = pytest.mark.filterwarnings("ignore:The ``noload`` loader strategy:DeprecationWarning")


def two_epochs(clock: FakeClock, reg: perfkit.Registry, sinks: list[Any]) -> list[dict[str, float]]:
    """Train and validate twice (windows 0 to 3); the metrics of each window."""
    out = []
    for e in range(2):
        for stage, wait_ms in (("train", 1), ("val", 4)):
            with window(stage, epoch=e, registry=reg, sinks=sinks) as w:
                for _ in w.iterate(SlowLoader(clock, batches=2, size=3, wait_ns=wait_ms * MS)):
                    clock.advance((e + 2) * MS)
            out.append(w.metrics)
    return out


@pytest.fixture
def report(tmp_path: Path) -> Path:
    path = tmp_path / "report.html"
    path.write_text("<!DOCTYPE html><html><body><section id='findings'>ok</section></body></html>")
    return path


def test_jsonl_round_trip(tmp_path: Path, clock: FakeClock, reg: perfkit.Registry) -> None:
    sink = JsonlSink(tmp_path / "out" / "metrics.jsonl")
    metrics = two_epochs(clock, reg, [sink])
    sink.close()
    with window("test", epoch=2, registry=reg, sinks=[sink]):  # reopened, appended to
        pass
    sink.close()
    lines = [json.loads(x) for x in (tmp_path / "out" / "metrics.jsonl").read_text().splitlines()]
    assert [(x["stage"], x["epoch"], x["step"]) for x in lines] == [
        ("train", 0, 0),
        ("val", 0, 1),
        ("train", 1, 2),
        ("val", 1, 3),
        ("test", 2, 4),
    ]
    assert [x["metrics"] for x in lines[:4]] == metrics


# ---- W&B, offline: a run per test, always finished ---------------------------------------------


@pytest.fixture
def wandb_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    wandb = pytest.importorskip("wandb")
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path))
    monkeypatch.setenv("WANDB_SILENT", "true")
    run = wandb.init(project="perfkit-tests", dir=str(tmp_path))
    try:
        yield run
    finally:
        wandb.finish()


def test_wandb_gets_every_window_whatever_else_the_script_logs(
    wandb_run: Any, clock: FakeClock, reg: perfkit.Registry
) -> None:
    for i in range(5):
        wandb_run.log({"loss": 1.0 / (i + 1)})  # W&B's own step is at 5 before our window 0
    sink = WandbSink()
    metrics = two_epochs(clock, reg, [sink])
    assert sink.flush()
    summary = wandb_run.summary
    assert summary["perf/window"] == 3
    assert summary["perf/train/steps"] == 2
    assert summary["perf/train/step_ms_mean"] == pytest.approx(metrics[2]["perf/train/step_ms_mean"])
    assert summary["perf/val/data_wait_fraction"] == pytest.approx(metrics[3]["perf/val/data_wait_fraction"])
    assert summary["perf/val/time_per_sample_vs_train_ratio"] > 1


def test_the_report_is_attached_to_the_wandb_run_as_html(wandb_run: Any, report: Path) -> None:
    attach_report_to_wandb(report)
    logged = wandb_run.summary["perfkit/report"]
    assert logged["_type"] == "html-file"
    stored = Path(wandb_run.dir) / logged["path"]
    assert "<section id='findings'>ok</section>" in stored.read_text()


def test_without_a_wandb_run_the_window_warns_once(clock: FakeClock, reg: perfkit.Registry) -> None:
    pytest.importorskip("wandb")
    with pytest.warns(perfkit.PerfkitWarning, match="no W&B run: call wandb.init"):
        two_epochs(clock, reg, [WandbSink(run=None)])


# ---- MLflow on a SQLite store: one store for the module ----------------------------------------


@pytest.fixture(scope="module")
def mlflow_uri(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    mlflow = pytest.importorskip("mlflow")
    root = tmp_path_factory.mktemp("mlflow")
    uri = f"sqlite:///{root}/mlflow.db"
    before = mlflow.get_tracking_uri()
    mlflow.set_tracking_uri(uri)
    artifacts = (root / "artifacts").as_uri()
    mlflow.set_experiment(experiment_id=mlflow.MlflowClient(uri).create_experiment("perfkit", artifacts))
    try:
        yield uri
    finally:
        mlflow.set_tracking_uri(before)


def history(uri: str, run_id: str, key: str) -> list[tuple[int, float]]:
    from mlflow import MlflowClient

    return [(m.step, m.value) for m in MlflowClient(uri).get_metric_history(run_id, key)]


def test_mlflow_gets_every_window_at_its_step_in_the_active_run(
    mlflow_uri: str, clock: FakeClock, reg: perfkit.Registry
) -> None:
    import mlflow

    sink = MlflowSink()
    with mlflow.start_run() as active:
        metrics = two_epochs(clock, reg, [sink])
    assert sink.flush()  # the windows went out on the sink's own thread
    assert history(mlflow_uri, active.info.run_id, "perf/val/steps") == [(1, 2.0), (3, 2.0)]
    means = history(mlflow_uri, active.info.run_id, "perf/train/step_ms_mean")
    assert means == [(0, pytest.approx(metrics[0]["perf/train/step_ms_mean"])), (2, pytest.approx(3.0))]


def test_mlflow_to_a_given_run_and_server(mlflow_uri: str, clock: FakeClock, reg: perfkit.Registry) -> None:
    from mlflow import MlflowClient

    client = MlflowClient(mlflow_uri)
    run_id = client.create_run(client.get_experiment_by_name("perfkit").experiment_id).info.run_id
    sink = MlflowSink(run_id=run_id, tracking_uri=mlflow_uri)
    two_epochs(clock, reg, [sink])
    sink.close()
    assert sink.background.lost == 0
    assert [s for s, _ in history(mlflow_uri, run_id, "perf/train/data_wait_fraction")] == [0, 2]


def test_the_report_is_an_mlflow_artifact(mlflow_uri: str, report: Path) -> None:
    import mlflow

    with mlflow.start_run() as active:
        log_report_to_mlflow(report)
    artifacts = mlflow.MlflowClient(mlflow_uri).list_artifacts(active.info.run_id, "perfkit")
    assert [a.path for a in artifacts] == ["perfkit/report.html"]


def test_a_missing_report_is_named(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=f"report {tmp_path / 'r.html'} does not exist"):
        log_report_to_mlflow(tmp_path / "r.html", run_id="0")


def test_without_an_mlflow_run_the_window_warns_once(
    mlflow_uri: str, clock: FakeClock, reg: perfkit.Registry
) -> None:
    with pytest.warns(perfkit.PerfkitWarning, match="no active MLflow run") as seen:
        two_epochs(clock, reg, [MlflowSink()])
    assert len(seen) == 1
