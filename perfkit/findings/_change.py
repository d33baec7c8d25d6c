"""CHANGE: an interval of a long epoch that differs, beyond noise, from the run so far.

A stage epoch's figure averages everything in it: a slow shard from step 4,000, a node that
starts to throttle, memory that starts to climb. Each interval window of the epoch (see
``perfkit.stages.Intervals``) is compared with the intervals before it, part by part, per step:
a part whose time per step moved by more than the noise (3 standard deviations), a third of its
usual value and a tenth of the interval is a change; memory whose peak climbed in each of the
last intervals, by a tenth over the run so far, is one too. The verdict says what moved, from
what to what, and from which step and when.

The data wait and the step have a record per step, so they are judged from the second interval
on, at the step where they moved: the steps of the interval (and of the one before it) are split
where the steps after the split sit furthest on the new side of the midpoint between the run so
far and the interval, and the level after the split is what is compared. A change that begins in
the middle of an interval is then called in that interval, not diluted into it (nor, uncalled,
into the baseline the next one is compared with). Their noise is the spread between the
intervals before and the standard error of the per-step samples; the other parts, measured only
as a sum per interval, wait for two intervals to measure theirs.

    timeline = Timeline()
    for window in intervals:                # windows of scope "interval", oldest first
        change = timeline.judge(window)     # CHANGE verdicts, or none
"""

from __future__ import annotations

import itertools
import math
import statistics
from dataclasses import dataclass, field

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
"""Intervals needed before a part measured only as a sum can differ from them: the spread of one
interval is no spread (the data wait and the step, with a record per step, need one)."""
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
    error: dict[str, float] = field(default_factory=dict)
    """The standard error of ``per_step`` of the parts with a record per step (``_SERIES``)."""


def point(window: StageWindow) -> Point | None:
    """The interval as a point of its stage's timeline (None without steps)."""
    first, last = window.steps or (0, -1)
    steps = last - first + 1
    if steps <= 0 or window.wall_s <= 0:
        return None
    a = window.account
    error = {}
    for part in _SERIES:
        samples = _samples(window.snapshot, _series(window, part))
        if samples is not None and len(samples[0]) > 1:
            error[part] = float(np.std(samples[0], ddof=1)) / math.sqrt(len(samples[0])) / 1e9
    return Point(
        first, last, window.wall_s, {p: a.seconds(p) / steps for p in PARTS}, _memory(window.snapshot), error
    )


@dataclass
class _Case:
    window: StageWindow
    now: Point
    before: list[Point]
    previous: StageWindow | None
    since: dict[str, tuple[int, float]]
    began_ns: int


@dataclass(frozen=True)
class _Shift:
    """Where a part moved inside the interval (and the one before it), from its per-step samples."""

    step: int
    start_ns: int
    level_s: float  # the part's seconds per step after the split, on the interval's account
    steps: int  # of the interval's steps, those after the split
    error_s: float  # the standard error of ``level_s``


class Timeline:
    """The intervals of one stage so far, and the changes seen in them (see the module docstring)."""

    def __init__(self) -> None:
        self.baseline: list[Point] = []
        self.previous: StageWindow | None = None
        self.since: dict[str, tuple[int, float]] = {}  # part -> the step (and s) a change in force began
        self.began: tuple[int, int] | None = None  # (epoch, ns) the epoch being judged began at

    def begin(self, warmup: StageWindow) -> None:
        """An epoch's warm-up (scope ``warmup``): its start is the epoch's, what a change's time is from."""
        self.began = (warmup.epoch, warmup.snapshot.start_ns)

    def judge(self, window: StageWindow) -> list[Verdict]:
        """The CHANGE verdicts of ``window`` against the intervals before it; then it joins them."""
        now = point(window)
        if now is None:
            return []
        if self.began is None or self.began[0] != window.epoch:  # no warm-up said: from this interval
            self.began = (window.epoch, window.snapshot.start_ns)
        case = _Case(window, now, self.baseline, self.previous, self.since, self.began[1])
        found = [v for v in CHANGE.apply(case) if isinstance(v, Verdict)]
        moved = {v.subject for v in found}
        self.since = {p: s for p, s in self.since.items() if p in moved}
        if not found:  # an interval like the others: it joins the baseline
            self.baseline = [*self.baseline, now][-KEEP:]
        self.previous = window
        return found


def change(case: _Case) -> list[Verdict]:
    """Each part whose time per step moved beyond noise, and climbing memory (see the module docstring)."""
    out = [v for p in PARTS if (v := _part_change(case, p)) is not None]
    memory = _memory_change(case) if len(case.before) >= BASELINE else None
    return out + ([memory] if memory is not None else [])


def _part_change(case: _Case, part: str) -> Verdict | None:
    if len(case.before) < (1 if part in _SERIES else BASELINE):
        return None
    values = [b.per_step[part] for b in case.before]
    mean = statistics.fmean(values)
    between = statistics.stdev(values) if len(values) > 1 else 0.0
    before_error = statistics.fmean(b.error.get(part, 0.0) for b in case.before)
    now = case.now
    shift = _shift(case, part, mean)
    steps = now.last_step - now.first_step + 1
    if shift is None:  # no per-step samples: the interval as a whole, from its first step
        shift = _Shift(now.first_step, case.window.snapshot.start_ns, now.per_step[part], steps, 0.0)
    x = shift.level_s
    delta = x - mean
    noise = math.sqrt(between**2 + before_error**2 + shift.error_s**2)
    share = abs(delta) * shift.steps / now.wall_s
    if abs(delta) <= max(NOISE_SIGMAS * noise, MIN_RELATIVE * mean) or share < MIN_SHARE:
        return None
    if part not in case.since:  # a change still in force keeps the step it began at
        case.since[part] = (shift.step, max(0.0, (shift.start_ns - case.began_ns) / 1e9))
    start, start_s = case.since[part]
    w = case.window
    label = part_label(part)
    ratio = f" ({x / mean:.1f}x)" if mean > 0 else ""
    return verdict(
        share,
        f"from step {start} of {display_name(w.stage)} epoch {w.epoch} ({format_seconds(start_s)} into "
        f"it), {label} per step went from {format_seconds(mean)} to {format_seconds(x)}{ratio}, against "
        "the run so far",
        _ACTIONS.get(part, "look at what changed at that step"),
        subject=part,
        evidence={
            "start_step": float(start),
            "start_s": start_s,
            "before_s": mean,
            "after_s": x,
            "noise_s": noise,
        },
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


_SERIES = ("data_wait", "step")
"""The parts with a record per step: judged where they moved, from one interval before."""


def _series(window: StageWindow, part: str) -> str:
    return step_series(window.stage) if part == "step" else wait_series(window.loader_name)


def _shift(case: _Case, part: str, before: float) -> _Shift | None:
    """Where ``part`` moved from ``before`` (seconds per step): the split of this interval's samples
    (and the one before's) where the steps after it lean furthest to the interval's side of the
    midpoint, and its level after. None without per-step samples, or without a move to split on."""
    w, now = case.window, case.now
    mine = _samples(w.snapshot, _series(w, part)) if part in _SERIES else None
    if mine is None or not len(mine[0]) or now.per_step[part] == before:
        return None
    durations, starts = mine
    offset = now.first_step
    prev = case.previous
    if prev is not None and prev.steps is not None and prev.steps[1] == now.first_step - 1:
        earlier = _samples(prev.snapshot, _series(prev, part))
        if earlier is not None and len(earlier[0]) == prev.steps[1] - prev.steps[0] + 1:
            durations, starts = np.concatenate([earlier[0], durations]), np.concatenate([earlier[1], starts])
            offset = prev.steps[0]
    after = now.per_step[part]
    mid = (before + after) / 2 * 1e9
    side = np.where(durations > mid, 1, -1) * (1 if after > before else -1)
    suffix = np.cumsum(side[::-1])[::-1]  # how far the steps from each one on lean to the new level
    i = int(np.argmax(suffix))
    tail = durations[i:]
    level = after + (float(tail.mean()) - float(mine[0].mean())) / 1e9  # on the account's footing
    error = float(np.std(tail, ddof=1)) / math.sqrt(len(tail)) / 1e9 if len(tail) > 1 else math.inf
    return _Shift(offset + i, int(starts[i]), level, min(len(tail), len(mine[0])), error)


def _samples(snapshot: Snapshot, series: str) -> tuple[np.ndarray, np.ndarray] | None:
    """A series' durations and starts in the order of the steps (None where that order is lost)."""
    if series not in snapshot:
        return None
    data = snapshot.data(series)
    if data.dropped or snapshot.sketched:  # the order of the steps is not known
        return None
    order = np.argsort(data.starts_ns, kind="stable")
    return data.durations_ns[order], data.starts_ns[order]


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
    start = case.since.setdefault("memory", (case.before[-2].first_step, 0.0))[0]
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
