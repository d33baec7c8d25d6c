"""The console block a monitor prints for each phase epoch (rank 0, when asked to)."""

from __future__ import annotations

from collections.abc import Mapping

import perfkit
from perfkit import format_seconds

_OWN = ("step", "data.wait", "data.fetch")


def summary_line(window: perfkit.PhaseWindow, metrics: Mapping[str, float], *, prefix: str = "perf") -> str:
    """A few lines saying where the epoch's time went, from the same numbers that were logged."""
    p = perfkit.metric_key(prefix, window.phase)
    steps = int(metrics.get(f"{p}/steps", 0))
    head = f"[perfkit] {window.phase} epoch {window.epoch}: {steps} steps in {format_seconds(window.wall_s)}"
    if f"{p}/samples_per_s" in metrics:
        head += f", {metrics[f'{p}/samples_per_s']:.1f} samples/s"
    ratio = metrics.get(f"{p}/time_per_sample_vs_train_ratio")
    if ratio is not None:
        head += f" ({ratio:.1f}x training's time per sample)"
    lines = [head]
    if steps:
        lines.append(
            "  step     "
            + "  ".join(f"{q} {metrics[f'{p}/step_ms_{q}']:.1f} ms" for q in ("median", "p95", "max"))
        )
    data = _data_line(metrics, p)
    if data:
        lines.append("  data     " + data)
    series = _series_line(window)
    if series:
        lines.append("  series   " + series)
    memory = ", ".join(
        f"{k.rsplit('/', 1)[1].replace('_peak_mb', '')} {v / 1024:.2f} GB"
        for k, v in metrics.items()
        if k.endswith("_peak_mb") and "/series/" not in k
    )
    if memory:
        lines.append("  memory   peak " + memory)
    if window.slowest:
        lines.append("  slowest  " + ", ".join(_slow(s) for s in window.slowest[:3]))
    return "\n".join(lines)


def _data_line(metrics: Mapping[str, float], p: str) -> str:
    parts = []
    if f"{p}/data_wait_fraction" in metrics:
        parts.append(
            f"waiting {metrics[f'{p}/data_wait_fraction']:.1%} of the epoch, "
            f"{metrics[f'{p}/data_wait_ms_mean']:.1f} ms per batch"
        )
    if f"{p}/worker_batch_ms_mean" in metrics:
        text = f"workers take {metrics[f'{p}/worker_batch_ms_mean']:.1f} ms per batch"
        if f"{p}/workers_needed" in metrics:
            text += f": {int(metrics[f'{p}/workers_needed'])} needed, {int(metrics[f'{p}/workers'])} now"
        parts.append(text)
    return "; ".join(parts)


def _series_line(window: perfkit.PhaseWindow, top: int = 4) -> str:
    snap = window.snapshot
    own = {f"{window.phase}.{o}" for o in _OWN} | {f"{window.data}.wait", f"{window.data}.fetch"}
    names = [n for n in snap if n not in own and not n.endswith((".step", ".data.wait", ".data.fetch"))]
    wall = window.wall_s or 1.0
    return ", ".join(
        f"{n} {format_seconds(snap[n].total_s)} ({snap[n].total_s / wall:.0%})" for n in names[:top]
    )


def _slow(step: perfkit.SlowStep) -> str:
    tags = "".join(f", {k}={v:g}" for k, v in step.tags.items())
    return f"batch {step.batch_idx} ({step.duration_s * 1e3:.1f} ms{tags})"
