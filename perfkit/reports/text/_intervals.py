"""Interval windows in text: the provisional block, one line per interval, the warm-up left out.

A long epoch is cut into intervals while it runs (``perfkit.stages.Intervals``). The first
interval after the warm-up gets a whole console block, marked provisional; each later one a
line; a change (``perfkit.findings.CHANGE``) its verdict under the line. ``timeline_text`` is
the same lines for ``perfkit summary``, from what the run directory kept.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..._display import display_name
from ..._units import format_seconds
from ...findings import Verdict
from ...stages import StageWindow, stage_prefix
from ._console import summary_text


def steps_text(window: StageWindow) -> str:
    """``steps 10-59``: the interval's steps of its epoch."""
    first, last = window.steps or (0, -1)
    return f"steps {first}-{last}"


def provisional_text(
    window: StageWindow,
    metrics: Mapping[str, float],
    *,
    prefix: str,
    verdict: Verdict | None,
    warmup: StageWindow | None,
) -> str:
    """The first interval's console block, marked provisional, with what the warm-up left out."""
    heading = (
        f"{display_name(window.stage)} epoch {window.epoch}, {steps_text(window)} "
        "(provisional: the epoch is still running)"
    )
    text = summary_text(window, metrics, prefix=prefix, verdict=verdict, heading=heading)
    return text + ("\n  warm-up  " + warmup_text(warmup, window) if warmup is not None else "")


def warmup_text(warmup: StageWindow, after: StageWindow | None = None) -> str:
    """Which steps were left out as warm-up, and why: how much slower they were, and the
    loader's start (worker start-up, the first batch) that they paid for."""
    first, last = warmup.steps or (0, -1)
    n = last - first + 1
    text = f"{steps_text(warmup)} left out ({format_seconds(warmup.wall_s)})"
    why = []
    if after is not None and after.steps is not None and n > 0 and after.wall_s > 0:
        per_step = warmup.wall_s / n
        typical = after.wall_s / (after.steps[1] - after.steps[0] + 1)
        if typical > 0 and per_step > 1.2 * typical:
            why.append(f"{per_step / typical:.1f}x the time per step after them")
    data = warmup.account.subjects.get("data_wait", {})
    start = data.get("iter", 0.0) + data.get("first_batch", 0.0)
    if start >= 0.01:
        why.append(f"the loader's start (iter() and the first batch) took {format_seconds(start)}")
    why.append("first steps pay for compilation, worker start-up and cold caches")
    return text + ": " + "; ".join(why)


def interval_line(
    window: StageWindow, metrics: Mapping[str, float], *, prefix: str, verdicts: Sequence[Verdict] = ()
) -> str:
    """One line per interval: its steps, time per step, data wait, throughput, top verdict; then
    each change under it."""
    p = stage_prefix(window.stage, prefix)
    parts = [f"{format_seconds(window.wall_s)}"]
    if f"{p}/step_ms_median" in metrics:
        parts.append(f"step median {metrics[f'{p}/step_ms_median']:.1f} ms")
    if f"{p}/data_wait_fraction" in metrics:
        parts.append(f"data wait {metrics[f'{p}/data_wait_fraction']:.0%}")
    if f"{p}/samples_per_s" in metrics:
        parts.append(f"{metrics[f'{p}/samples_per_s']:.1f} samples/s")
    said = "the epoch's last" if window.ends_epoch else "provisional"  # the epoch's window follows it
    head = (
        f"[perfkit] {display_name(window.stage)} epoch {window.epoch} {steps_text(window)} "
        f"({said}): " + ", ".join(parts)
    )
    top = next((v for v in verdicts if v.kind != "CHANGE"), None)
    if top is not None:
        head += f" -> {top.kind} ({top.share:.0%})"
    changes = [
        f"  change   {display_name(v.message, None)} -> {v.action}" for v in verdicts if v.kind == "CHANGE"
    ]
    return "\n".join([head, *changes])
