"""CHANGE: an interval of a long epoch that differs, beyond noise, from the run so far.

A stage epoch's figure averages everything in it: a slow shard from step 4,000, a node that
starts to throttle, memory that starts to climb. Each interval window of the epoch (see
``perfkit.stages.Intervals``) is compared with the intervals before it, part by part, per step:
a part whose time per step moved by more than the intervals' own noise (3 standard deviations),
a third of its usual value and a tenth of the interval is a change; memory whose peak climbed
in each of the last intervals, by a tenth over the run so far, is one too. The verdict says
what moved, by how much, and from which step: the step is found inside the interval (and the
one before it) from the part's own samples, where the steps after it sit furthest on the new
side of the midpoint between before and after.

    timeline = Timeline()
    for window in intervals:                # windows of scope "interval", oldest first
        change = timeline.judge(window)     # a CHANGE verdict, or None
"""

from __future__ import annotations

import itertools
import statistics
from dataclasses import dataclass

import numpy as np

from .._display import display_name
from .._rule import Rule, Verdict, verdict
from .._snapshot import Snapshot
from .._units import format_seconds
from ..names import part_label, step_series, wait_series
from ..stages import PARTS, StageWindow

NOISE_SIGMAS = 3.0
MIN_RELATIVE = 1 / 3
MIN_SHARE = 0.10
MEMORY_CLIMB = 0.10
MEMORY_GAUGES = ("process.rss_mb", ".memory_used_mb", ".reserved_mb")
BASELINE = 2
"""Intervals needed before one can differ from them: the spread of one interval is no spread."""
KEEP = 64
"""Intervals a timeline keeps as its baseline (the oldest leave first): bounded on a week-long run."""


@dataclass(frozen=True)
class Point:
    """One interval of a stage, per step: what the next ones are compared with."""

    first_step: int
    last_step: int
    wall_s: float
    per_step: dict[str, float]  # seconds per step of each part
    memory_mb: float | None


def point(window: StageWindow) -> Point | None:
    """The interval as a point of its stage's timeline (None without steps)."""
    first, last = window.steps or (0, -1)
    steps = last - first + 1
    if steps <= 0 or window.wall_s <= 0:
        return None
    a = window.account
    return Point(
        first, last, window.wall_s, {p: a.seconds(p) / steps for p in PARTS}, _memory(window.snapshot)
    )


@dataclass
class _Case:
    window: StageWindow
    now: Point
    before: list[Point]
    previous: StageWindow | None
    since: dict[str, int]


class Timeline:
    """The intervals of one stage so far, and the changes seen in them (see the module docstring)."""

    def __init__(self) -> None:
        self.baseline: list[Point] = []
        self.previous: StageWindow | None = None
        self.since: dict[str, int] = {}  # part -> the step a change still in force started at

    def judge(self, window: StageWindow) -> list[Verdict]:
        """The CHANGE verdicts of ``window`` against the intervals before it; then it joins them."""
        now = point(window)
        if now is None:
            return []
        case = _Case(window, now, self.baseline, self.previous, self.since)
        found = [v for v in CHANGE.apply(case) if isinstance(v, Verdict)]
        moved = {v.subject for v in found}
        self.since = {p: s for p, s in self.since.items() if p in moved}
        if not found:  # an interval like the others: it joins the baseline
            self.baseline = [*self.baseline, now][-KEEP:]
        self.previous = window
        return found


def change(case: _Case) -> list[Verdict]:
    """Each part whose time per step moved beyond noise, and climbing memory (see the module docstring)."""
    if len(case.before) < BASELINE:
        return []
    out = [v for p in PARTS if (v := _part_change(case, p)) is not None]
    memory = _memory_change(case)
    return out + ([memory] if memory is not None else [])


def _part_change(case: _Case, part: str) -> Verdict | None:
    values = [b.per_step[part] for b in case.before]
    mean = statistics.fmean(values)
    noise = statistics.stdev(values) if len(values) > 1 else 0.0
    x = case.now.per_step[part]
    delta = x - mean
    steps = case.now.last_step - case.now.first_step + 1
    share = abs(delta) * steps / case.now.wall_s
    if abs(delta) <= max(NOISE_SIGMAS * noise, MIN_RELATIVE * mean) or share < MIN_SHARE:
        return None
    start = case.since.get(part)
    if start is None:
        start = case.since[part] = _start(case, part, mean, x)
    w = case.window
    label = part_label(part)
    ratio = f" ({x / mean:.1f}x)" if mean > 0 else ""
    return verdict(
        share,
        f"from step {start} of {display_name(w.stage)} epoch {w.epoch}, {label} per step went from "
        f"{format_seconds(mean)} to {format_seconds(x)}{ratio}, against the run so far",
        _ACTIONS.get(part, "look at what changed at that step"),
        subject=part,
        evidence={"start_step": float(start), "before_s": mean, "after_s": x, "noise_s": noise},
        stage=w.stage,
        epoch=w.epoch,
        part=part if delta > 0 else None,
    )


_ACTIONS = {
    "data_wait": "look at what the loader reads from that step on: a slower shard, storage or network, "
    "workers starved of CPU by another process",
    "step": "look at the device from that step on: thermal throttling or clocks (nvidia-smi -q -d "
    "PERFORMANCE), another job on it, longer sequences in the data",
}


def _start(case: _Case, part: str, before: float, after: float) -> int:
    """The step the change began at: where the part's own samples (this interval's and the one
    before's) cross to the new level for good. The interval's first step when no series says."""
    w = case.window
    series = {"step": step_series(w.stage), "data_wait": wait_series(w.loader_name)}.get(part)
    first = case.now.first_step
    if series is None:
        return first
    durations = _durations(w.snapshot, series)
    if durations is None:
        return first
    offset = first
    prev = case.previous
    if prev is not None and prev.steps is not None and prev.steps[1] == first - 1:
        earlier = _durations(prev.snapshot, series)
        if earlier is not None and len(earlier) == prev.steps[1] - prev.steps[0] + 1:
            durations, offset = np.concatenate([earlier, durations]), prev.steps[0]
    mid = (before + after) / 2 * 1e9
    side = np.where(durations > mid, 1, -1) * (1 if after > before else -1)
    suffix = np.cumsum(side[::-1])[::-1]  # how far the steps from each one on lean to the new level
    return offset + int(np.argmax(suffix))


def _durations(snapshot: Snapshot, series: str) -> np.ndarray | None:
    if series not in snapshot:
        return None
    data = snapshot.data(series)
    if data.dropped or snapshot.sketched:  # the order of the steps is not known
        return None
    return data.durations_ns[np.argsort(data.starts_ns, kind="stable")]


def _memory(snapshot: Snapshot) -> float | None:
    peaks = [g.max for name, g in snapshot.gauges.items() if name.endswith(MEMORY_GAUGES)]
    return max(peaks) if peaks else None


def _memory_change(case: _Case) -> Verdict | None:
    recent = [*(b.memory_mb for b in case.before[-2:]), case.now.memory_mb]
    first = case.before[0].memory_mb
    if first is None or any(m is None for m in recent):
        return None
    climbing = [float(m) for m in recent if m is not None]
    if not all(b > a for a, b in itertools.pairwise(climbing)) or climbing[-1] < first * (1 + MEMORY_CLIMB):
        return None
    w = case.window
    start = case.since.setdefault("memory", case.before[-2].first_step)
    return verdict(
        0.0,
        f"memory climbs in every interval since step {start} of {display_name(w.stage)} epoch {w.epoch}: "
        f"peak {first:.0f} MB at the first interval, {climbing[-1]:.0f} MB now",
        "a leak grows with steps: look for tensors kept across steps (a list of losses without .item(), "
        "caches keyed by batch)",
        subject="memory",
        evidence={"start_step": float(start), "first_mb": first, "now_mb": climbing[-1]},
        stage=w.stage,
        epoch=w.epoch,
    )


CHANGE: Rule[_Case] = Rule(
    "CHANGE",
    ("intervals",),
    MIN_SHARE,
    "a part must move beyond the intervals' own noise (3 standard deviations), a third of its usual "
    "time and a tenth of the interval: smaller moves are the noise of a shared machine",
    change,
)
