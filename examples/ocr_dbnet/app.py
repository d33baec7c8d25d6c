"""The demo run: fine-tune the DBNet detector with perfkit watching, then say where the time went.

Instrumented the way the README tells users to: ``@perfkit.timed`` on the
PyClipper calls in ``db_collate_fn`` and on the post-processing (see
``targets.py``, ``postprocess.py``), and perfkit-lightning's callbacks from
the Hydra config: PerfMonitor (per-epoch metrics, the loaders' workers
instrumented, the resource sampler), the seeds' PerformanceProfilerCallback
and a profiler window on a validation epoch.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import torch
from hydra.core.hydra_config import HydraConfig
from hydra.utils import instantiate
from lightning.pytorch.loggers import CSVLogger
from omegaconf import DictConfig, OmegaConf

import perfkit
from perfkit import format_seconds

from .module import DBNetModule, make_loaders
from .pretrain import pretrained_weights


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
    run_dir = Path(logger.log_dir) / "perfkit"
    print(where_validation_time_went(run_dir), flush=True)
    report = _report(run_dir) if cfg.report else None
    print(_outputs(logger, run_dir, out, report), flush=True)
    return out


def where_validation_time_went(run_dir: Path) -> str:
    """The demo's closing block, from the last validation window the run recorded."""
    lines = [json.loads(x) for x in (run_dir / "windows.jsonl").read_text().splitlines()]
    val = [x for x in lines if x["phase"] == "val"][-1]
    train = [x for x in lines if x["phase"] == "train"][-1]
    snap = perfkit.Snapshot.from_json((run_dir / val["snapshot"]).read_text())
    m = val["metrics"]
    steps = int(m.get("perf/val/steps", 0)) or 1
    out = [f"\n[demo] Where validation spent its time (epoch {val['epoch']}, {val['samples']} receipts):"]
    out.append(
        f"  waiting for batches: {m.get('perf/val/data_wait_fraction', 0):.0%} of the epoch "
        f"({m.get('perf/val/data_wait_ms_mean', 0):.0f} ms per batch); "
        f"compute {m.get('perf/val/step_ms_mean', 0):.0f} ms per batch"
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
            f"{post.total_s / val['wall_s']:.0%} of the epoch; "
            f"PyClipper unclip {unclip / post.total_s:.0%} of it"
        )
    if "perf/val/workers_needed" in m:
        needed = int(m["perf/val/workers_needed"])
        out.append(
            f"  workers: {m['perf/val/worker_batch_ms_mean']:.0f} ms per batch in a worker against "
            f"{m['perf/val/step_ms_mean']:.0f} ms of compute: {needed} worker{'s' if needed > 1 else ''} "
            f"would keep validation from waiting ({int(m['perf/val/workers'])} now)"
        )
    ratio = m.get("perf/val/time_per_sample_vs_train_ratio")
    if ratio is not None:
        out.append(
            f"  validation takes {ratio:.1f}x training's time per receipt "
            f"(training: {train['metrics'].get('perf/train/samples_per_s', 0):.1f} receipts/s, "
            f"validation: {m.get('perf/val/samples_per_s', 0):.1f})"
        )
    return "\n".join(out)


def _report(run_dir: Path) -> Path | None:
    try:
        return perfkit.write_html_report(run_dir)
    except Exception as exc:  # the run's data are on disk whatever happens to the report
        print(f"[demo] no HTML report: {exc!r}")
        return None


def _outputs(logger: CSVLogger, run_dir: Path, out: Path, report: Path | None) -> str:
    traces = sorted((out / "profiler_traces").glob("*.json*")) if (out / "profiler_traces").exists() else []
    lines = [
        "\n[demo] Outputs:",
        f"  metrics (CSVLogger):  {Path(logger.log_dir) / 'metrics.csv'}",
        f"  run data (perfkit):   {run_dir}",
    ]
    lines += [f"  profiler trace:       {t}   (perfkit analyze {t})" for t in traces]
    if report is not None:
        lines.append(f"  report:               {report}")
    return "\n".join(lines)
