"""The run's HTML report, next to the metrics in the W&B run or the MLflow run the Trainer logged to.

At the end of a fit PerfMonitor writes ``report.html`` into the run directory and hands it to
each W&B logger (as a ``wandb.Html`` panel) and each MLflow logger (as an artifact under
``perfkit/``) of the Trainer. A report that cannot be written or uploaded is one warning.
"""

from __future__ import annotations

from pathlib import Path

from lightning.pytorch import Trainer
from lightning.pytorch.loggers import MLFlowLogger, WandbLogger

from ._console import warn


def attach_report(trainer: Trainer, run_dir: Path) -> Path | None:
    """Write the report of ``run_dir`` and attach it to the Trainer's W&B and MLflow loggers (if any)."""
    targets = [lg for lg in trainer.loggers if isinstance(lg, (WandbLogger, MLFlowLogger))]
    if not targets:
        return None
    try:
        from perfkit.reports import attach_report_to_wandb, write_html_report

        path = write_html_report(run_dir)
        for logger in targets:
            if isinstance(logger, WandbLogger):
                attach_report_to_wandb(path, run=logger.experiment)
            elif logger.run_id is not None:
                logger.experiment.log_artifact(logger.run_id, str(path), "perfkit")
    except Exception as exc:  # the run's data are on disk whatever happens to its report
        warn(f"perfkit: the run report was not attached: {exc!r}")
        return None
    return path
