"""The same metrics reach W&B (offline) and MLflow (a local SQLite store), read back from each."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from lightning.pytorch.loggers import CSVLogger, MLFlowLogger, WandbLogger
from perfkit_lightning import PerfMonitor

import perfkit

from .tiny import Tiny, trainer


@pytest.fixture
def wandb_offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    wandb = pytest.importorskip("wandb")
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path))
    yield
    wandb.finish()  # Lightning's WandbLogger never finishes its run


def test_wandb_and_mlflow_get_every_epoch_metric(tmp_path: Path, wandb_offline: None) -> None:
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    wandb_logger = WandbLogger(project="perfkit-tests", save_dir=str(tmp_path))
    mlflow_logger = MLFlowLogger(
        experiment_name="perfkit", tracking_uri=uri, artifact_location=str(tmp_path / "artifacts")
    )
    csv_logger = CSVLogger(str(tmp_path))
    monitor = PerfMonitor(sample_resources=False)
    with perfkit.use_registry(perfkit.Registry()):
        trainer(str(tmp_path), [monitor], logger=[wandb_logger, mlflow_logger, csv_logger]).fit(Tiny())

    summary = wandb_logger.experiment.summary
    last_train = monitor.last_metrics["train"]
    assert summary["perf/train/steps"] == 8
    assert summary["perf/train/step_ms_p95"] == pytest.approx(last_train["perf/train/step_ms_p95"])
    assert summary["perf/val/data_wait_fraction"] == pytest.approx(
        monitor.last_metrics["val"]["perf/val/data_wait_fraction"]
    )

    client = MlflowClient(uri)
    history = client.get_metric_history(mlflow_logger.run_id, "perf/val/steps")
    assert [(m.step, m.value) for m in history] == [(7, 4.0), (15, 4.0)]  # validation after 8 and 16 steps
    train = client.get_metric_history(mlflow_logger.run_id, "perf/train/step_ms_mean")
    assert [m.step for m in train] == [7, 15]
    assert train[-1].value == pytest.approx(last_train["perf/train/step_ms_mean"])
    assert client.get_metric_history(mlflow_logger.run_id, "perf/train/series/forward/count")[-1].value == 8.0
    # the run's report, next to the metrics: an MLflow artifact, and a W&B panel
    artifacts = [a.path for a in client.list_artifacts(mlflow_logger.run_id, "perfkit")]
    assert artifacts == ["perfkit/report.html"]
    assert summary.get("perfkit/report") is not None
