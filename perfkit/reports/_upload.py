"""The HTML report next to a run's metrics: a W&B media panel, an MLflow artifact.

path = write_html_report("runs/exp1")
attach_report_to_wandb(path)            # the active wandb.run
log_report_to_mlflow(path)              # the active MLflow run
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from .._extras import import_extra
from ..sinks import mlflow_target, wandb_run


def attach_report_to_wandb(
    path: str | os.PathLike[str], run: Any = None, key: str = "perfkit/report"
) -> None:
    """Log the report at ``path`` as ``wandb.Html`` under ``key`` to ``run`` (default: ``wandb.run``).

    The page goes in as it is (``inject=False``): W&B's injected stylesheet is a network link,
    and the report is meant to need none.
    """
    wandb = import_extra("wandb", "wandb", "attach_report_to_wandb")
    text = _report_file(path).read_text(encoding="utf-8")
    wandb_run(wandb, run, "attach_report_to_wandb").log({key: wandb.Html(text, inject=False)})


def log_report_to_mlflow(
    path: str | os.PathLike[str],
    run_id: str | None = None,
    tracking_uri: str | None = None,
    *,
    artifact_path: str = "perfkit",
) -> None:
    """Store the report at ``path`` as an artifact of run ``run_id`` (default: the active run)."""
    mlflow = import_extra("mlflow", "mlflow", "log_report_to_mlflow")
    file = _report_file(path)
    client, run = mlflow_target(mlflow, run_id, tracking_uri, "log_report_to_mlflow")
    client.log_artifact(run, str(file), artifact_path)


def _report_file(path: str | os.PathLike[str]) -> Path:
    file = Path(path)
    if not file.is_file():
        raise FileNotFoundError(
            f"report {file} does not exist: write it with perfkit.reports.write_html_report"
        )
    return file
