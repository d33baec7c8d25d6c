"""The demo run: fine-tune the DBNet detector with perfkit watching, then say where the time went.

Instrumented the way the README tells users to: ``@perfkit.timed`` on the
PyClipper calls in ``db_collate_fn`` and on the post-processing (see
``targets.py``, ``postprocess.py``), and perfkit-lightning's callbacks from
the Hydra config: PerfMonitor (per-epoch metrics, the loaders' workers
instrumented, the resource sampler), the PerformanceProfilerCallback preset
and a profiler window on a validation epoch.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import torch
from hydra.core.hydra_config import HydraConfig
from hydra.utils import instantiate
from lightning.pytorch.loggers import CSVLogger
from omegaconf import DictConfig, OmegaConf

import perfkit
from perfkit.findings import diagnose
from perfkit.names import RUN_DIR_NAME
from perfkit.reports import format_seconds, write_html_report
from perfkit.run import RunData, read_run

from .module import DBNetModule, make_loaders
from .pretrain import pretrained_weights

log = logging.getLogger(__name__)


def run(cfg: DictConfig) -> Path:
    """Train and validate as configured; returns the run's output directory."""
    out = Path(HydraConfig.get().runtime.output_dir)
    pl.seed_everything(cfg.seed, verbose=False)
    torch.set_num_threads(cfg.torch_threads)
    data: dict[str, Any] = OmegaConf.to_container(cfg.data, resolve=True)  # type: ignore[assignment]
    for key in ("lines", "val_lines"):
        if data.get(key) is not None:
            data[key] = tuple(data[key])
    weights = pretrained_weights(
        cfg.pretrain.cache_dir, epochs=cfg.pretrain.epochs, lr=cfg.pretrain.lr, data=data
    )
    train, val = make_loaders(**data)
    module = DBNetModule(lr=cfg.model.lr)
    module.load_state_dict(weights)
    callbacks = [instantiate(node) for node in cfg.callbacks.values()]
    logger = CSVLogger(str(out), name="csv", version="")
    trainer = pl.Trainer(**cfg.trainer, logger=logger, callbacks=callbacks, default_root_dir=str(out))
    trainer.fit(module, train, val)
    if not perfkit.is_enabled():  # PERFKIT_DISABLED=1: the same run, with nothing recorded to read
        log.info("[demo] perfkit is disabled: the run recorded nothing, so there is nothing to summarise")
        return out
    run_dir = Path(logger.log_dir) / RUN_DIR_NAME
    if not run_dir.is_dir():  # callbacks=performance_profiler (the preset's own line): no PerfMonitor, no run
        log.info(
            "[demo] no perfkit run directory (PerfMonitor is not among the callbacks): nothing to summarise"
        )
        return out
    run = read_run(run_dir)
    log.info(verdicts(run))
    log.info(where_validation_time_went(run))
    report = _report(run_dir) if cfg.report else None
    log.info(_outputs(logger, run, report))
    return out


def verdicts(run: RunData, top: int = 5) -> str:
    """What perfkit concludes about the run: its verdicts, ranked by the share of the run they explain."""
    diagnosis = diagnose(run)
    lines = ["\n[demo] perfkit's verdicts, ranked by the share of the run's time they explain:"]
    for i, v in enumerate(diagnosis.verdicts[:top], 1):
        lines.append(
            f"  {i}. {v.kind}, {v.run_share:.0%} of the run ({v.share:.0%} of {v.stage} epoch {v.epoch}):"
        )
        lines.append(f"     {v.message}")
        lines.append(f"     -> {v.action}")
    if not diagnosis.verdicts:
        lines.append("  nothing stands out: no rule crossed its threshold")
    return "\n".join(lines)


def where_validation_time_went(run: RunData) -> str:
    """The demo's closing block, from the last validation window the run recorded."""
    val = [w for w in run.windows if w.stage == "val"][-1]
    train = [w for w in run.windows if w.stage == "train"][-1]
    snap, a = val.snapshot, val.window.account
    steps = int(val.metric("steps") or 1)
    out = [f"\n[demo] Where validation spent its time (epoch {val.epoch}, {val.samples} receipts):"]
    out.append(
        "  its account: "
        + ", ".join(
            f"{part.replace('_', ' ')} {a.fraction(part):.0%}" for part in a.parts if a.fraction(part) >= 0.01
        )
    )
    out.append(
        f"  waiting for batches: {a.fraction('data_wait'):.0%} of the epoch "
        f"({val.metric('data_wait_ms_mean') or 0:.0f} ms per batch); "
        f"compute {val.metric('step_ms_mean') or 0:.0f} ms per batch"
    )
    collate = snap.get("db_collate_fn")
    if collate is not None:
        clipper = sum(snap[s].total_s for s in ("pyclipper.shrink", "pyclipper.dilate") if s in snap)
        distance = snap["threshold.distance"].total_s if "threshold.distance" in snap else 0.0
        out.append(
            f"  db_collate_fn (in the workers): {format_seconds(collate.total_s / steps)} per batch, "
            f"PyClipper offsets {clipper / collate.total_s:.0%} of it, "
            f"border distances {distance / collate.total_s:.0%}"
        )
    post = snap.get("postprocess")
    if post is not None:
        unclip = snap["pyclipper.unclip"].total_s if "pyclipper.unclip" in snap else 0.0
        out.append(
            f"  post-processing (main process): {format_seconds(post.total_s / steps)} per batch, "
            f"{post.total_s / val.wall_s:.0%} of the epoch; "
            f"PyClipper unclip {unclip / post.total_s:.0%} of it"
        )
    needed, workers = val.metric("workers_needed"), val.metric("workers")
    if needed is not None and workers is not None:
        out.append(
            f"  workers: {val.metric('worker_batch_ms_mean') or 0:.0f} ms per batch in a worker: "
            f"{int(needed)} worker{'s' if needed > 1 else ''} would match validation's pace, each on a core "
            f"of its own ({int(workers)} now; within the cores and memory: the INPUT_BOUND verdict)"
        )
    ratio = val.metric("time_per_sample_vs_train_ratio")
    if ratio is not None:
        out.append(
            f"  validation takes {ratio:.1f}x training's time per receipt "
            f"(training: {train.metric('samples_per_s') or 0:.1f} receipts/s, "
            f"validation: {val.metric('samples_per_s') or 0:.1f})"
        )
    return "\n".join(out)


def _report(run_dir: Path) -> Path | None:
    try:
        return write_html_report(run_dir)
    except Exception as exc:  # the run's data are on disk whatever happens to the report
        log.warning("[demo] no HTML report: %r", exc)
        return None


def _outputs(logger: CSVLogger, run: RunData, report: Path | None) -> str:
    lines = [
        "\n[demo] Outputs:",
        f"  metrics (CSVLogger):  {Path(logger.log_dir) / 'metrics.csv'}",
        f"  run data (perfkit):   {run.path}",
    ]
    lines += [f"  profiler trace:       {t.trace}   (perfkit analyze {t.trace})" for t in run.traces]
    if report is not None:
        lines.append(f"  report:               {report}")
    return "\n".join(lines)
