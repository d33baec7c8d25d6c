"""STRAGGLER: the rank the others wait for, judged over every epoch of its stage.

Under DDP the fast ranks wait for the slow one inside the gradient all-reduce, so their step
times converge: a slow rank shows in its data wait (compared first) and, where there are no
collectives, in its steps. Each epoch has at most one straggler; over the stage's epochs a rank
is *chronic* (slowest in most of them: its shard, its machine) or a *one-off* (slow once: something
else ran there), and the verdict says which, with the ranks slowest most often in its evidence.
"""

from __future__ import annotations

from dataclasses import dataclass

from .._rule import Outcome
from .._units import format_seconds
from ..names import stage_label
from ..stages import StageWindow
from ._case import Case


def _ms(seconds: float) -> str:
    return format_seconds(seconds)


STRAGGLER_MIN = 0.10


@dataclass(frozen=True)
class _Straggler:
    """The rank that made the others wait in one stage epoch, and by how much."""

    epoch: int
    rank: int
    part: str  # the account part it was slow in
    excess_s: float  # its seconds of that part beyond the other ranks' median
    share: float  # excess_s against its own wall
    spent: tuple[float, ...]  # every rank's seconds of that part, in rank order


def _straggler_of(window: StageWindow) -> _Straggler | None:
    """The straggler of one epoch, if one rank exceeded the others by ``STRAGGLER_MIN`` of its wall."""
    ranks = window.ranks
    if len(ranks) < 2:
        return None
    # A rank slow to get its data makes the others wait for it inside their collectives, which
    # are inside their steps: so data wait is compared first, and a longer step only counts when
    # no rank's data explains it (in validation, where there are no collectives, steps differ).
    for part in ("data_wait", "step"):
        spent = [r.account.seconds(part) for r in ranks]
        culprit = max(range(len(ranks)), key=spent.__getitem__)
        others = sorted(spent[i] for i in range(len(ranks)) if i != culprit)
        excess = spent[culprit] - others[len(others) // 2]
        wall = ranks[culprit].wall_s
        share = excess / wall if wall > 0 else 0.0
        if share >= STRAGGLER_MIN:
            return _Straggler(window.epoch, ranks[culprit].rank, part, excess, share, tuple(spent))
    return None


STRAGGLER_TOP = 3
"""Ranks listed in a STRAGGLER verdict's evidence: the ones slowest in the most epochs."""


def straggler(case: Case) -> Outcome:
    """The rank the others wait for, judged over every epoch of the stage: a rank slowest in each
    epoch (chronic: its shard, its machine) reads differently from one slow once (a one-off)."""
    if len(case.window.ranks) < 2:
        return None
    epochs = [w for w in (*case.history, case.window) if len(w.ranks) > 1]
    found = [f for f in map(_straggler_of, epochs) if f is not None]
    if not found:
        return None
    tally: dict[int, list[_Straggler]] = {}
    for f in found:
        tally.setdefault(f.rank, []).append(f)
    last = found[-1] if found[-1].epoch == case.window.epoch else None
    rank = last.rank if last else max(tally, key=lambda r: (len(tally[r]), sum(f.share for f in tally[r])))
    mine = tally[rank]
    n, k = len(epochs), len(mine)
    mean = sum(f.share for f in mine) / k
    shown = last or mine[-1]
    what = "data loading" if shown.part == "data_wait" else "steps"
    label = stage_label(case.stage)
    if last is not None:
        victims = [str(r.rank) for r in case.window.ranks if r.rank != rank]
        waiting = f"rank {victims[0]} waits" if len(victims) == 1 else f"ranks {', '.join(victims)} wait"
        message = (
            f"rank {rank} is the straggler of {label}: its {what} took {_ms(last.excess_s)} more than the "
            f"other ranks' in the epoch, and {waiting} for it"
        )
        share = last.share
    else:  # not in the last epoch: what it cost over the stage's epochs
        message = (
            f"rank {rank} was the straggler of {label} in an earlier epoch (epoch {shown.epoch}: its {what} "
            f"took {_ms(shown.excess_s)} more than the other ranks'), not in the last"
        )
        share = sum(f.share for f in mine) / n
    if n > 1:
        message += (
            f"; slowest in {k} of {n} epochs, +{mean:.0%} on average"
            if k > 1
            else (f"; slowest once in {n} epochs (+{mean:.0%})")
        )
    if k > 1 and k * 2 > n:
        action = f"make rank {rank}'s {what} as fast as the others' (its data shard, its files, its device)"
    elif n > 1:
        action = (
            f"a one-off on rank {rank}: look at what else ran on its machine in epoch {shown.epoch} "
            "(a checkpoint, another job) before changing its data or device"
        )
    else:
        action = f"make rank {rank}'s {what} as fast as the others' (its data shard, its files, its device)"
    evidence = {f"rank{i}_{shown.part}_s": s for i, s in enumerate(shown.spent)} if last else {}
    evidence |= {"epochs": float(n), "epochs_slowest": float(k), "excess_fraction_mean": mean}
    top = sorted(tally, key=lambda r: (-len(tally[r]), -sum(f.share for f in tally[r])))[:STRAGGLER_TOP]
    evidence |= {f"rank{r}_epochs_slowest": float(len(tally[r])) for r in top}
    return case.verdict(share, message, action, subject=f"rank {rank}", evidence=evidence, part=shown.part)
