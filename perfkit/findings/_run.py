"""What a run's windows say in plain words: what dominates, and what changed between epochs.

Each rule reads the metrics of ``windows.jsonl`` (and the section tree of a window's
snapshot) and has a named threshold; a finding's ``value`` is the number that crossed it.
"Dominates" rules read each phase's last epoch (past its warm-up); change rules compare
a phase's first epoch with its last.

    >>> WAIT_MIN_SHARE
    0.2
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .._units import format_seconds
from ..names import fetch_series, stage_label, step_series, wait_series
from ..run import RunData, RunWindow
from ._finding import Finding

WAIT_MIN_SHARE = 0.2  # of a phase epoch spent waiting for data
SECTION_MIN_SHARE = 0.1  # of a phase epoch (of its workers' time, for a section in the workers)
PER_SAMPLE_MIN_RATIO = 1.5  # another phase's time per sample against training's


@dataclass(frozen=True)
class Change:
    """A metric (named as after the phase) whose growth from the first epoch to the last is reported."""

    metric: str
    label: str
    min_growth: float


CHANGES = (  # per phase
    Change("step_ms_p95", "step p95", 0.2),
    Change("data_wait_ms_mean", "data wait per batch", 0.5),
)
MEMORY_CHANGES = (  # over the whole run: every phase sees the same processes
    Change("process_rss_peak_mb", "process memory peak", 0.2),
    Change("workers_rss_peak_mb", "workers' memory peak", 0.2),
)


def run_findings(run: RunData) -> tuple[Finding, ...]:
    """The findings of ``run``: the time split between phases first, then each phase's findings."""
    phases: dict[str, list[RunWindow]] = {}
    for w in sorted(run.windows, key=lambda w: w.start_ns):
        phases.setdefault(w.stage, []).append(w)
    if not phases:
        return ()
    found = [time_split(phases)]
    for windows in phases.values():
        last = windows[-1]
        found += [f for f in (data_wait(last), slowest_section(last), per_sample(last)) if f]
    for windows in phases.values():
        found += changes(windows, CHANGES, f"{stage_label(windows[0].stage)} ")
    ordered = [w for ws in phases.values() for w in ws]
    found += changes(sorted(ordered, key=lambda w: w.start_ns), MEMORY_CHANGES, "")
    return tuple(found)


def time_split(phases: dict[str, list[RunWindow]]) -> Finding:
    walls = {p: sum(w.wall_s for w in ws) for p, ws in phases.items()}
    total = sum(walls.values()) or 1.0
    first, *rest = sorted(walls, key=walls.__getitem__, reverse=True)

    def part(p: str) -> str:
        return f"{walls[p] / total:.0%} ({_n(len(phases[p]), 'epoch')}, {format_seconds(walls[p])})"

    text = f"{stage_label(first)} takes {part(first).replace(' (', ' of the measured time (', 1)}"
    text += "".join(f", {stage_label(p)} {part(p)}" for p in rest)
    return Finding("time_split", text, walls[first] / total)


def data_wait(w: RunWindow) -> Finding | None:
    share = w.metric("data_wait_fraction")
    if share is None or share < WAIT_MIN_SHARE:
        return None
    text = f"{stage_label(w.stage)} spends {share:.0%} of its epoch {w.epoch} waiting for data"
    fetch, step = w.metric("worker_batch_ms_mean"), w.metric("step_ms_mean")
    workers, needed = w.metric("workers"), w.metric("workers_needed")
    if fetch is not None and step is not None and workers is not None and needed is not None:
        text += f"; workers take {_ms(fetch)} per batch against {_ms(step)} of compute: "
        if needed > workers:
            text += f"{needed:.0f} workers would keep up ({workers:.0f} now)"
        else:
            text += (
                f"{workers:.0f} workers should keep up ({needed:.0f} needed), so the wait comes from "
                "elsewhere: the epoch's first batches, or moving batches between processes"
            )
    elif step is not None and (wait := w.metric("data_wait_ms_mean")) is not None:
        text += f": {_ms(wait)} per batch against {_ms(step)} of compute (no DataLoader worker records)"
    return Finding("data_wait", text, share)


def slowest_section(w: RunWindow) -> Finding | None:
    """The user's section with the most self time in the window (perfkit's own series left out)."""
    tree = w.snapshot.tree
    own = {step_series(w.stage), wait_series(w.stage), fetch_series(w.stage)}
    best, best_ns = None, 0
    for path, node in tree.items():
        if path[-1] in own:
            continue
        kids = sum(t.total_ns for p, t in tree.items() if len(p) == len(path) + 1 and p[:-1] == path)
        if node.total_ns - kids > best_ns:
            best, best_ns = path, node.total_ns - kids
    if best is None or w.wall_s <= 0:
        return None
    in_workers = best[0].endswith(".fetch")
    workers = max(1.0, w.metric("workers") or 1.0) if in_workers else 1.0
    share = best_ns / 1e9 / (w.wall_s * workers)
    if share < SECTION_MIN_SHARE:
        return None
    where = f"the {workers:.0f} workers' time in epoch" if in_workers else "its epoch"
    text = (
        f"the slowest section in {stage_label(w.stage)} is {best[-1]}"
        f"{' (in the DataLoader workers)' if in_workers else ''}: {format_seconds(best_ns / 1e9)} "
        f"of self time, {share:.0%} of {where} {w.epoch}"
    )
    return Finding("section", text, share)


def per_sample(w: RunWindow) -> Finding | None:
    ratio = w.metric("time_per_sample_vs_train_ratio")
    if ratio is None or ratio < PER_SAMPLE_MIN_RATIO or not w.samples:
        return None
    mine = w.wall_s / w.samples
    text = (
        f"{stage_label(w.stage)} takes {ratio:.1f}x training's time per sample "
        f"({format_seconds(mine)} against {format_seconds(mine / ratio)} in epoch {w.epoch})"
    )
    return Finding("per_sample", text, ratio)


def changes(windows: Sequence[RunWindow], rules: Sequence[Change], subject: str) -> list[Finding]:
    """What grew from the first of ``windows`` to the last (windows of one phase, or of the run)."""
    first, last = windows[0], windows[-1]
    if first.epoch == last.epoch:
        return []
    same_phase = first.stage == last.stage
    out = []
    for c in rules:
        a, b = first.metric(c.metric), last.metric(c.metric)
        if a is None or b is None or a <= 0 or b / a - 1 < c.min_growth:
            continue
        start, end = (
            f"epoch {w.epoch}" if same_phase else f"{w.stage} epoch {w.epoch}" for w in (first, last)
        )
        text = (
            f"{subject}{c.label} grew {b / a - 1:.0%} from {start} to {end} "
            f"({_value(c.metric, a)} → {_value(c.metric, b)})"
        )
        out.append(Finding("change", text, b / a - 1))
    return out


def _value(metric: str, v: float) -> str:
    return f"{v:,.0f} MB" if metric.endswith("_mb") else _ms(v)


def _ms(v: float) -> str:
    return format_seconds(v / 1e3)


def _n(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"
