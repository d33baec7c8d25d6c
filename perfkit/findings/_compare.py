"""Two runs compared: per stage, how each part of the account changed, beyond the runs' own noise.

Each stage is compared per step (``part seconds / steps`` of each epoch past the first when a
run has several), so runs of different lengths compare. A change counts when it is larger than
its noise band: two standard errors of the difference, from the epoch-to-epoch spread of each
run, and never less than 2% of the stage's time per step (a single epoch has no spread to go
by). The verdict line says IMPROVEMENT, REGRESSION or NO CHANGE, with the part that explains it,
and, inside it, the part one level deeper that moved most the same way beyond its own noise (the
step's forward, backward, optimizer step, zero_grad and rest; the wait's sampler, worker, receive,
pin, make): "train's step saved 3.10 ms per step ..., of it the optimizer 2.95 ms". A change made
inside the step (a fused optimizer, an EMA every N steps) is then named as what it changed.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .._display import display_name
from .._rule import Verdict
from ..run import RunData
from ..stages import PARTS, StageWindow
from ._diagnose import diagnose
from .workers import advice_followed

NOISE_FLOOR = 0.02
"""The smallest change of a part that counts, as a fraction of the stage's time per step."""
DEEPER = {"step": "step", "data_wait": "wait_parts"}
"""The account's parts that have parts of their own, and the subject that holds them."""


@dataclass(frozen=True)
class PartChange:
    """One part of one stage's account, per step, in two runs."""

    stage: str
    part: str
    before_s: float
    after_s: float
    noise_s: float

    @property
    def change_s(self) -> float:
        return self.after_s - self.before_s

    @property
    def significant(self) -> bool:
        return abs(self.change_s) > self.noise_s

    def to_dict(self) -> dict[str, Any]:
        return {
            "stage": self.stage,
            "part": self.part,
            "before_s_per_step": self.before_s,
            "after_s_per_step": self.after_s,
            "change_s_per_step": self.change_s,
            "noise_s_per_step": self.noise_s,
            "significant": self.significant,
        }


@dataclass(frozen=True)
class Comparison:
    """Run B against run A: part changes, verdicts that appeared or went, and one conclusion."""

    before: str
    after: str
    changes: tuple[PartChange, ...]
    appeared: tuple[Verdict, ...]
    gone: tuple[Verdict, ...]
    conclusion: str  # IMPROVEMENT, REGRESSION or NO CHANGE
    because: PartChange | None
    moved: tuple[PartChange, PartChange] | None = None
    """Two parts of a stage that changed beyond their noise in opposite directions (the one that
    shrank, the one that grew): time that moved, not time saved."""
    advice: str = ""
    """Whether run B made the change run A's top verdict proposed, and what it gained against the
    prediction."""
    within: PartChange | None = None
    """The part of ``because`` one level deeper (``step.optimizer``, ``data_wait.sampler``) that
    changed most the same way beyond its noise; None where none did or none was recorded."""

    @property
    def line(self) -> str:
        if self.moved is not None and (self.because is None or self.conclusion == "NO CHANGE"):
            down, up = self.moved
            why = (
                ": the workers compete with the model for cores"
                if (down.part, up.part) == ("data_wait", "step")
                else ""
            )
            return (
                f"{self.conclusion} overall: {display_name(down.stage)}'s {down.part.replace('_', ' ')} "
                f"{down.change_s * 1e3:+.2f} ms/step moved into the {up.part.replace('_', ' ')} "
                f"{up.change_s * 1e3:+.2f} ms/step{why}"
            )
        if self.because is None:
            return f"{self.conclusion}: no part of any stage changed beyond its noise"
        c = self.because
        verb = "saved" if c.change_s < 0 else "added"
        line = (
            f"{self.conclusion}: {display_name(c.stage)}'s {c.part.replace('_', ' ')} {verb} "
            f"{abs(c.change_s) * 1e3:.2f} ms per step ({c.before_s * 1e3:.2f} -> {c.after_s * 1e3:.2f} ms, "
            f"noise band {c.noise_s * 1e3:.2f} ms)"
        )
        if self.within is not None:
            w = self.within
            name = w.part.split(".", 1)[1].replace("_", " ")
            line += (
                f", of it the {name} {abs(w.change_s) * 1e3:.2f} ms ({w.before_s * 1e3:.2f} -> "
                f"{w.after_s * 1e3:.2f} ms)"
            )
        return line

    @property
    def worst_growth(self) -> float:
        """The largest growth of a stage's wall time per step beyond its noise, as a fraction of
        run A's (0 when none grew): what ``--fail-on-regression`` gates on."""
        grew = [c.change_s / c.before_s for c in self.changes if c.part == "wall" and c.significant]
        return max([0.0, *grew])

    def to_dict(self) -> dict[str, Any]:
        return {
            "before": self.before,
            "after": self.after,
            "conclusion": self.conclusion,
            "because": None if self.because is None else self.because.to_dict(),
            "within": None if self.within is None else self.within.to_dict(),
            "line": self.line,
            "advice": self.advice,
            "changes": [c.to_dict() for c in self.changes],
            "appeared": [v.to_dict() for v in self.appeared],
            "gone": [v.to_dict() for v in self.gone],
        }


def compare_runs(before: RunData, after: RunData) -> Comparison:
    """Compare run ``after`` with run ``before`` (two run directories read by ``read_run``)."""
    a, b = _by_stage(before), _by_stage(after)
    changes = [c for stage in a if stage in b for c in _stage_changes(stage, a[stage], b[stage])]
    da, db = diagnose(before), diagnose(after)
    keys_a = {_key(v) for v in da.verdicts}
    keys_b = {_key(v) for v in db.verdicts}
    significant = [c for c in changes if c.significant]
    totals = [c for c in significant if c.part == "wall"]
    parts = [c for c in significant if c.part != "wall"]
    because = max(parts, key=lambda c: abs(c.change_s), default=None)
    if not totals:
        conclusion = "NO CHANGE"
    else:
        conclusion = "IMPROVEMENT" if sum(c.change_s for c in totals) < 0 else "REGRESSION"
        if because is not None and (because.change_s < 0) != (conclusion == "IMPROVEMENT"):
            same_way = [c for c in parts if (c.change_s < 0) == (conclusion == "IMPROVEMENT")]
            because = max(same_way, key=lambda c: abs(c.change_s), default=None)
    because = because if conclusion != "NO CHANGE" else None
    return Comparison(
        before=str(before.path),
        after=str(after.path),
        changes=tuple(changes),
        appeared=tuple(v for v in db.verdicts if _key(v) not in keys_a),
        gone=tuple(v for v in da.verdicts if _key(v) not in keys_b),
        conclusion=conclusion,
        because=because,
        moved=_moved(parts),
        advice=advice_followed(da.verdicts, a, b),
        within=None if because is None else _within(because, a[because.stage], b[because.stage]),
    )


def _within(because: PartChange, a: list[StageWindow], b: list[StageWindow]) -> PartChange | None:
    """The part of ``because`` one level deeper that changed most its way, beyond its noise."""
    subject = DEEPER.get(because.part)
    if subject is None:
        return None
    names = {n for w in (*a, *b) for n in w.account.subjects.get(subject, {})}
    deeper = [_change(because.stage, f"{because.part}.{n}", a, b, (subject, n)) for n in sorted(names)]
    same_way = [
        c for c in deeper if c is not None and c.significant and (c.change_s < 0) == (because.change_s < 0)
    ]
    return max(same_way, key=lambda c: abs(c.change_s), default=None)


def _moved(parts: Sequence[PartChange]) -> tuple[PartChange, PartChange] | None:
    """The largest shrink and the largest growth of one stage's parts, when both are beyond noise."""
    for stage in dict.fromkeys(c.stage for c in parts):
        mine = [c for c in parts if c.stage == stage]
        down = min(mine, key=lambda c: c.change_s)
        up = max(mine, key=lambda c: c.change_s)
        if down.change_s < 0 < up.change_s:
            return down, up
    return None


def _key(v: Verdict) -> tuple[str, str, str | None]:
    return (v.kind, v.stage, v.subject)


def _by_stage(run: RunData) -> dict[str, list[StageWindow]]:
    out: dict[str, list[StageWindow]] = {}
    for w in sorted(run.windows, key=lambda w: w.start_ns):
        if w.stage != "sanity":
            out.setdefault(w.stage, []).append(w.window)
    return out


def _per_step(
    windows: Sequence[StageWindow], part: str, deeper: tuple[str, str] | None = None
) -> list[float]:
    """``part``'s seconds per step in each settled epoch; ``deeper``: a subject's entry instead
    (``("step", "optimizer")``)."""
    settled = windows[1:] if len(windows) > 1 else windows  # the first epoch warms up
    out = []
    for w in settled:
        steps = _steps(w)
        if not steps:
            continue
        if deeper is not None:
            seconds = w.account.subjects.get(deeper[0], {}).get(deeper[1], 0.0)
        else:
            seconds = w.wall_s if part == "wall" else w.account.seconds(part)
        out.append(seconds / steps)
    return out


def _steps(w: StageWindow) -> int:
    step = w.snapshot.get(f"{w.stage}.step")
    return step.count // max(1, len(w.ranks)) if step is not None else 0


def _stage_changes(stage: str, a: list[StageWindow], b: list[StageWindow]) -> list[PartChange]:
    wall_a = _per_step(a, "wall")
    if not wall_a or not _per_step(b, "wall"):
        return []
    found = (_change(stage, part, a, b) for part in ("wall", *PARTS))
    return [c for c in found if c is not None]


def _change(
    stage: str, part: str, a: list[StageWindow], b: list[StageWindow], deeper: tuple[str, str] | None = None
) -> PartChange | None:
    """``part`` of ``stage`` per step in runs A and B, with its noise band (None without steps)."""
    wall_a = _per_step(a, "wall")
    xa, xb = _per_step(a, part, deeper), _per_step(b, part, deeper)
    if not wall_a or not xa or not xb:
        return None
    floor = NOISE_FLOOR * statistics.fmean(wall_a)
    spread = math.sqrt(_var(xa) / len(xa) + _var(xb) / len(xb))
    return PartChange(stage, part, statistics.fmean(xa), statistics.fmean(xb), max(2 * spread, floor))


def _var(xs: list[float]) -> float:
    return statistics.variance(xs) if len(xs) > 1 else 0.0
