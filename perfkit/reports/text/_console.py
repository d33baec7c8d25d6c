"""The console block a monitor logs for each stage epoch: where the epoch's time went, in a few lines.

Built from the window and the metrics that were logged for it, so the console and the
loggers never disagree. Records made in DataLoader workers are shown against the workers'
time (workers x epoch), never against the main process's epoch.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..._display import display_name
from ..._snapshot import Snapshot
from ..._units import format_seconds
from ...findings import Verdict
from ...names import (
    CALLBACKS,
    CHECKPOINT,
    LOGGERS,
    MODULE_HOOKS,
    STEP_PART,
    is_stage_series,
    part_label,
)
from ...stages import PARTS, StageWindow, stage_prefix


def summary_text(
    window: StageWindow,
    metrics: Mapping[str, float],
    *,
    prefix: str = "perf",
    verdict: Verdict | None = None,
    heading: str | None = None,
) -> str:
    """A few lines saying where the epoch's time went, from the same numbers that were logged;
    ``verdict`` (the epoch's top verdict) comes right after the first line. ``heading`` replaces
    ``STAGE epoch N`` (an interval of an epoch in progress says so)."""
    p = stage_prefix(window.stage, prefix)
    steps = int(metrics.get(f"{p}/steps", 0))
    title = heading or f"{display_name(window.stage)} epoch {window.epoch}"
    head = f"[perfkit] {title}: {steps} steps in " + format_seconds(window.wall_s)
    if f"{p}/samples_per_s" in metrics:
        head += f", {metrics[f'{p}/samples_per_s']:.1f} samples/s"
    ratio = metrics.get(f"{p}/time_per_sample_vs_train_ratio")
    if ratio is not None:
        head += f" ({ratio:.1f}x training's time per sample)"
    lines = [head]
    if verdict is not None:
        lines.append(
            f"  verdict  {verdict.kind} ({verdict.share:.0%}): {display_name(verdict.said, None)} -> "
            + display_name(verdict.action, None)
        )
    lines.append("  time     " + _account_line(window))
    if steps:
        lines.append(
            "  step     "
            + "  ".join(f"{q} {metrics[f'{p}/step_ms_{q}']:.1f} ms" for q in ("median", "p95", "max"))
        )
    subjects = window.account.subjects
    data = _data_line(metrics, p, subjects.get("stalled_on", {}), subjects.get("wait_parts", {}))
    if data:
        lines.append("  data     " + data)
    series = series_line(window.snapshot, window.wall_s)
    if series:
        lines.append("  series   " + series)
    memory = ", ".join(
        f"{display_name(k.rsplit('/', 1)[1].replace('_peak_mb', ''))} {v / 1024:.2f} GB"
        for k, v in metrics.items()
        if k.endswith("_peak_mb") and "/series/" not in k
    )
    if memory:
        lines.append("  memory   peak " + memory)
    if window.slowest:
        lines.append(
            "  slowest  " + ", ".join(_slow(s.batch_idx, s.duration_s, s.tags) for s in window.slowest[:3])
        )
    lost = lost_line(window.snapshot)
    if lost:
        lines.append("  lost     " + lost)
    return "\n".join(lines)


WAIT_PART_WORDS = {
    "sampler": "the sampler",
    "make": "making batches here",
    "receive": "rebuilding workers' batches",
    "pin": "pinning",
    "worker": "a worker's batch",
    "other": "other",
}
"""How the console names where a wait went (``perfkit.names.WAIT_PARTS`` and ``WORKER_WAIT``)."""


def lost_line(snap: Snapshot) -> str:
    """What the window's figures are missing, counted: records DataLoader workers dropped in
    transfer, and those the registry dropped (empty when nothing was lost)."""
    parts = (
        [f"{snap.dropped_in_transfer:,} worker records dropped in transfer"]
        if snap.dropped_in_transfer
        else []
    )
    parts += [f"{n:,} records dropped ({display_name(reason)})" for reason, n in snap.dropped.items()]
    return "; ".join(parts)


def _account_line(window: StageWindow) -> str:
    a = window.account
    parts = []
    for part in PARTS:
        share = a.fraction(part)
        if share < 0.005 and part != "other":
            continue
        text = f"{part_label(part)} {share:.0%}"
        top = sorted(_named(a.subjects, part).items(), key=lambda kv: -kv[1])[:2]
        if top and a.wall_s > 0:
            text += " (" + ", ".join(f"{display_name(n)} {s / a.wall_s:.0%}" for n, s in top) + ")"
        parts.append(text)
    if window.nested_s > 0:
        parts.append(f"+ {format_seconds(window.nested_s)} in other stages run inside it")
    return " · ".join(parts)


def _named(subjects: Mapping[str, Mapping[str, float]], part: str) -> dict[str, float]:
    """Who spent a part's time, where the account says (callbacks, the model's hooks, loggers, the
    step's parts)."""
    if part == CALLBACKS:
        return {**subjects.get(CALLBACKS, {}), **subjects.get(CHECKPOINT, {})}
    return dict(subjects.get(part, {})) if part in (MODULE_HOOKS, LOGGERS, STEP_PART) else {}


def _data_line(
    metrics: Mapping[str, float], p: str, stalled: Mapping[str, float], where: Mapping[str, float]
) -> str:
    parts = []
    if f"{p}/data_wait_fraction" in metrics:
        text = f"waiting {metrics[f'{p}/data_wait_fraction']:.1%} of the epoch"
        if f"{p}/data_wait_ms_mean" in metrics:
            text += f", {metrics[f'{p}/data_wait_ms_mean']:.1f} ms per batch"
        total = sum(where.values())
        if total > 0:  # where the main process spent the wait
            top = sorted(where.items(), key=lambda kv: -kv[1])[:2]
            text += " (" + ", ".join(f"{WAIT_PART_WORDS.get(n, n)} {s / total:.0%}" for n, s in top) + ")"
        each = sorted(k for k in metrics if k.startswith(f"{p}/loader/") and k.endswith("/data_wait_ms_mean"))
        if each:  # several loaders: each one's own figure, never only their average
            text += " (" + ", ".join(f"loader {k.split('/')[-2]} {metrics[k]:.1f} ms" for k in each) + ")"
        parts.append(text)
    if f"{p}/worker_batch_ms_mean" in metrics:  # what more workers would do is the verdict's to say
        n = int(metrics.get(f"{p}/workers", 0))
        workers = (
            f"{metrics[f'{p}/worker_batch_ms_mean']:.1f} ms per batch ({n} worker{'s' if n != 1 else ''})"
        )
        parts.append("workers take " + workers)
    if stalled:
        top = sorted(stalled.items(), key=lambda kv: -kv[1])[:2]
        parts.append(
            "waiting on "
            + ", ".join(f"{display_name(n)} {format_seconds(s)}" for n, s in top)
            + " in the workers"
        )
    return "; ".join(parts)


def series_line(snap: Snapshot, wall_s: float, top: int = 4) -> str:
    """The user's series with the most time: main-process ones against the epoch, worker ones
    against the workers' time (workers x epoch)."""
    main: list[tuple[str, float]] = []
    workers: list[tuple[str, float, int]] = []
    for name in snap:
        if is_stage_series(name):
            continue
        split = snap.by_worker(name)
        in_main = split[None].total_s if None in split else 0.0
        ids = [w for w in split if w is not None]
        if in_main > 0:
            main.append((name, in_main))
        if ids:
            workers.append((name, sum(split[w].total_s for w in ids), len(ids)))
    wall = wall_s or 1.0
    parts = [f"{display_name(n)} {format_seconds(s)} ({s / wall:.0%} of the epoch)" for n, s in main[:top]]
    for n, s, k in sorted(workers, key=lambda x: -x[1])[:top]:
        whose = "1 worker's" if k == 1 else f"{k} workers'"
        parts.append(
            f"{display_name(n)} {format_seconds(s)} in workers ({s / (k * wall):.0%} of the {whose} time)"
        )
    return ", ".join(parts)


def _slow(batch_idx: int, duration_s: float, tags: Mapping[str, float]) -> str:
    text = "".join(f", {display_name(k)}={v:g}" for k, v in tags.items())
    return f"batch {batch_idx} ({duration_s * 1e3:.1f} ms{text})"
