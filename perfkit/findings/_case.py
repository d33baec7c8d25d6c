"""What a rule reads about one stage epoch: the window, its stage's earlier epochs, training's window.

The helpers turn a snapshot into the user's sections run in the main process, with their self
time (what the loaders' workers did is ``workers``'s to read). They read perfkit's series by the
names ``perfkit.names`` gives them, never by spelling them out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .._rule import Abstention, Verdict, verdict
from .._snapshot import Snapshot
from ..loaders import TrialResult
from ..names import FETCH, WAIT, is_stage_series, step_series
from ..stages import StageWindow


@dataclass(frozen=True)
class Case:
    """One stage epoch to judge, with what the rules compare it to."""

    window: StageWindow
    history: tuple[StageWindow, ...]  # the same stage's earlier epochs, oldest first
    train: StageWindow | None  # the training window an evaluation stage is compared with
    cores: int  # cores the workers may use (the loop keeps one)
    stage_wall_s: float  # the stage's wall time over the whole run
    run_wall_s: float  # the whole run's measured wall time
    trials: tuple[TrialResult, ...] = ()  # loader trials the run recorded (perfkit.trial), oldest first

    @property
    def stage(self) -> str:
        return self.window.stage

    @property
    def wall_s(self) -> float:
        return self.window.wall_s

    @property
    def steps(self) -> int:
        return step_count(self.window)

    @property
    def rank_count(self) -> int:
        """How many ranks the window merges (1 without a process group)."""
        return max(1, len(self.window.ranks))

    @property
    def rank_wall_s(self) -> float:
        """The mean rank's wall time: what the mean rank's seconds (a merged total over
        ``rank_count``) are a share of. ``wall_s`` is the slowest rank's."""
        ranks = self.window.ranks
        return sum(r.wall_s for r in ranks) / len(ranks) if ranks else self.window.wall_s

    def fraction(self, part: str) -> float:
        return self.window.account.fraction(part)

    def verdict(
        self,
        share: float,
        message: str,
        action: str,
        *,
        subject: str | None = None,
        evidence: dict[str, float] | None = None,
        part: str | None = None,
        change: dict[str, Any] | None = None,
        gain: tuple[float, float] | None = None,
    ) -> Verdict:
        """A verdict on this epoch (its rule names it); its run share weighs ``share`` by the stage's
        part of the run."""
        weight = self.stage_wall_s / self.run_wall_s if self.run_wall_s > 0 else 1.0
        return verdict(
            share,
            message,
            action,
            subject=subject,
            evidence=evidence,
            stage=self.stage,
            epoch=self.window.epoch,
            weight=weight,
            part=part,
            change=change,
            gain=gain,
        )

    def abstain(self, missing: str) -> Abstention:
        """This epoch cannot be judged without ``missing`` (its rule names itself)."""
        return Abstention("", self.stage, self.window.epoch, missing)


def step_count(window: StageWindow) -> int:
    """The steps a stage epoch's window holds."""
    step = window.snapshot.get(step_series(window.stage))
    return step.count if step is not None else 0


@dataclass(frozen=True)
class SectionTime:
    """A user's section in the main process: where it is, and its own time (its children taken out)."""

    path: tuple[str, ...]
    self_s: float
    total_s: float
    count: int

    @property
    def name(self) -> str:
        return self.path[-1]


def main_sections(snap: Snapshot) -> list[SectionTime]:
    """The user's sections run by the loop itself, largest self time first.

    Work done in DataLoader workers (under a ``.data.fetch`` node) and work done inside the
    wait for a batch (a loader without workers: under ``.data.wait``) is data loading, not a
    section of the loop; perfkit's own series are left out.
    """
    tree = snap.tree
    children: dict[tuple[str, ...], int] = {}
    for path, totals in tree.items():
        if len(path) > 1:
            children[path[:-1]] = children.get(path[:-1], 0) + totals.total_ns
    out = []
    for path, totals in tree.items():
        if is_stage_series(path[-1]) or any(p.endswith((FETCH, WAIT)) for p in path[:-1]):
            continue
        own = max(0, totals.total_ns - children.get(path, 0))
        out.append(SectionTime(path, own / 1e9, totals.total_ns / 1e9, totals.count))
    return sorted(out, key=lambda s: -s.self_s)


def rank_sections(case: Case) -> list[SectionTime]:
    """``main_sections`` of the mean rank: a merged snapshot holds every rank's calls, so its
    totals are divided by the number of ranks (a share is then of ``Case.rank_wall_s``; against
    one rank's wall a merged total read as twice its share with two ranks)."""
    n = case.rank_count
    sections = main_sections(case.window.snapshot)
    if n == 1:
        return sections
    return [SectionTime(s.path, s.self_s / n, s.total_s / n, round(s.count / n)) for s in sections]
