"""STRAGGLER: the rank the others wait for, judged over every epoch of its stage.

Under DDP the fast ranks wait for the slow one inside the gradient all-reduce, so their step
times converge: a slow rank shows in its data wait (compared first) and, where each rank's wait in
the all-reduce was measured (``sync_wait``: ``perfkit.torch.time_gradient_sync``), in its
*compute* (its steps less that wait), which names a rank whose forward is slow while every rank's
step is as long; the others' waits say how long they waited for it. Without that measure, and
where there are no collectives (validation), steps are compared as they are. Each epoch has at
most one straggler; over the stage's epochs a rank is *chronic* (slowest in most of them: its
shard, its machine) or a *one-off* (slow once: something else ran there), and the verdict says
which, with the ranks slowest most often in its evidence.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..._rule import Outcome
from ..._units import format_seconds
from ...names import COLLECTIVE_WAIT, COMPUTE, DATA_WAIT, STEP_PART, SYNC_WAIT, stage_label
from ...stages import RankPart, StageWindow, straggler_parts
from .._case import Case
from ._rule import Rule


def _ms(seconds: float) -> str:
    return format_seconds(seconds)


@dataclass(frozen=True)
class _Straggler:
    """The rank that made the others wait in one stage epoch, and by how much."""

    epoch: int
    rank: int
    part: str  # what it was slow in: ``data_wait``, ``compute`` (step less sync wait) or ``step``
    excess_s: float  # its seconds of that beyond the other ranks' median
    share: float  # excess_s against its own wall
    spent: tuple[float, ...]  # every rank's seconds of that, in rank order
    waits: tuple[float, ...] | None  # every rank's sync wait, in rank order (None: not measured)
    steps: tuple[int, ...]  # every rank's steps, in rank order
    where: tuple[str, float] | None = None  # the step part its compute exceeds the others' most in
    held_in: str | None = None  # where the others waited: "the gradient all-reduce", "all_gather", ...

    @property
    def account_part(self) -> str:
        """The account part whose seconds the verdict claims: where the ranks' sync waits were
        timed, ``step``, whatever the straggler was slow in (the time the job loses is the other
        ranks' wait in the all-reduce, inside their steps; compute is a piece of ``step`` too)."""
        return STEP_PART if self.part == COMPUTE or self.waits is not None else self.part


def _spent(ranks: tuple[RankPart, ...], waits: list[float] | None) -> list[tuple[str, list[float]]]:
    """What is compared, in order, and every rank's seconds of it."""
    steps = [r.account.seconds(STEP_PART) for r in ranks]
    return [
        (DATA_WAIT, [r.account.seconds(DATA_WAIT) for r in ranks]),
        (STEP_PART, steps)
        if waits is None
        else (COMPUTE, [max(0.0, s - w) for s, w in zip(steps, waits, strict=True)]),
    ]


SPREAD = 2.0
"""How many times the other ranks' own spread (slowest less fastest) a rank's excess must pass."""


def _straggler_of(window: StageWindow, minimum: float) -> _Straggler | None:
    """The straggler of one epoch, if one rank exceeded the others by ``minimum`` of its wall."""
    ranks = window.ranks
    if len(ranks) < 2:
        return None
    measured = [_wait(r) for r in ranks]
    waits = None if any(w is None for w in measured) else [w or 0.0 for w in measured]
    # A rank slow to get its data makes the others wait for it inside their collectives, which
    # are inside their steps: so data wait is compared first, and a longer step (or compute, where
    # the waits were measured) only counts when no rank's data explains it (in validation, where
    # there are no collectives, steps differ).
    for part, spent in _spent(ranks, waits):
        culprit = max(range(len(ranks)), key=spent.__getitem__)
        others = sorted(spent[i] for i in range(len(ranks)) if i != culprit)
        excess = spent[culprit] - others[len(others) // 2]
        wall = ranks[culprit].wall_s
        share = excess / wall if wall > 0 else 0.0
        # a straggler stands out from the pack by more than the pack's own spread: in a first
        # epoch every rank's start-up differs, and the slowest of four by chance is no straggler
        if share >= minimum and excess > SPREAD * (others[-1] - others[0]):
            where, held_in = _located(window, ranks[culprit].rank) if part == COMPUTE else (None, None)
            return _Straggler(
                window.epoch,
                ranks[culprit].rank,
                part,
                excess,
                share,
                tuple(spent),
                None if waits is None else tuple(waits),
                tuple(r.steps for r in ranks),
                where,
                held_in,
            )
    return None


def _wait(rank: RankPart) -> float | None:
    """A rank's measured wait for the others: in DDP's gradient all-reduce and in collectives (None
    where neither was timed)."""
    o = rank.account.overlays
    if SYNC_WAIT not in o and COLLECTIVE_WAIT not in o:
        return None
    return (o.get(SYNC_WAIT) or 0.0) + (o.get(COLLECTIVE_WAIT) or 0.0)


def _located(window: StageWindow, rank: int) -> tuple[tuple[str, float] | None, str | None]:
    """Where in its step the slow rank's compute exceeds the others' (step parts timed), and the
    collective the others waited in longest (collectives timed)."""
    found = straggler_parts(window)
    if found is None or found.rank != rank:
        return None, None
    where = (found.part, found.excess_s[found.part]) if found.excess_s[found.part] > 0 else None
    held = max(found.others_wait_s, key=found.others_wait_s.__getitem__) if found.others_wait_s else None
    return where, (None if held is None else ("the gradient all-reduce" if held == "all_reduce" else held))


_WHAT = {
    DATA_WAIT: "data loading",
    COMPUTE: "compute (its steps, its wait for the others taken out)",
    STEP_PART: "steps",
}
_FIX = {
    DATA_WAIT: "its data shard, its files, its device",
    COMPUTE: "its device, its batches' sizes, what else runs on its machine",
    STEP_PART: "its data shard, its files, its device",
}
LISTED_RANKS = 8
"""Ranks named one by one in a verdict's words; beyond, they are counted."""


def _waiting(s: _Straggler, ranks: tuple[RankPart, ...]) -> str:
    """Who waits for the straggler, and how long where their waits in the all-reduce were measured."""
    victims = [(i, r.rank) for i, r in enumerate(ranks) if r.rank != s.rank]
    if len(victims) == 1:
        who = f"rank {victims[0][1]} waits"
    elif len(victims) <= LISTED_RANKS:
        who = f"ranks {', '.join(str(r) for _, r in victims)} wait"
    else:
        who = f"the other {len(victims)} ranks wait"
    if s.waits is None:
        return f"{who} for it"
    held = s.held_in or "the gradient all-reduce"
    waits = sorted(s.waits[i] for i, _ in victims)
    per_step = sorted(s.waits[i] / s.steps[i] for i, _ in victims if s.steps[i])
    median = waits[len(waits) // 2]
    step = f", {_ms(per_step[len(per_step) // 2])} a step" if per_step else ""
    own = s.waits[next(i for i, r in enumerate(ranks) if r.rank == s.rank)]
    return (
        f"{who} for it in {held}: {_ms(median)} each in the epoch{step} "
        f"(median; rank {s.rank} itself waits {_ms(own)})"
    )


STRAGGLER_TOP = 3
"""Ranks listed in a STRAGGLER verdict's evidence: the ones slowest in the most epochs."""


def straggler(case: Case, minimum: float) -> Outcome:
    """The rank the others wait for, judged over every epoch of the stage: a rank slowest in each
    epoch (chronic: its shard, its machine) reads differently from one slow once (a one-off)."""
    if len(case.window.ranks) < 2:
        return None
    epochs = [w for w in (*case.history, case.window) if len(w.ranks) > 1]
    found = [f for f in (_straggler_of(w, minimum) for w in epochs) if f is not None]
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
    what = _WHAT[shown.part]
    label = stage_label(case.stage)
    if last is not None:
        not_data = ", not its data" if last.part == COMPUTE else ""
        located = f", {_ms(last.where[1])} of it in {last.where[0]}" if last.where else ""
        message = (
            f"rank {rank} is the straggler of {label}: its {what} took {_ms(last.excess_s)} more than the "
            f"other ranks' in the epoch{located}{not_data}, and {_waiting(last, case.window.ranks)}"
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
    noun = "compute" if shown.part == COMPUTE else what
    if k > 1 and k * 2 > n:
        action = f"make rank {rank}'s {noun} as fast as the others' ({_FIX[shown.part]})"
    elif n > 1:
        action = (
            f"a one-off on rank {rank}: look at what else ran on its machine in epoch {shown.epoch} "
            "(a checkpoint, another job) before changing its data or device"
        )
    else:
        action = f"make rank {rank}'s {noun} as fast as the others' ({_FIX[shown.part]})"
    evidence = (
        {f"rank{r.rank}_{shown.part}_s": s for r, s in zip(case.window.ranks, shown.spent, strict=True)}
        if last
        else {}
    )
    if last is not None and last.waits is not None:
        evidence |= {
            f"rank{r.rank}_{SYNC_WAIT}_s": w for r, w in zip(case.window.ranks, last.waits, strict=True)
        }
    evidence |= {"epochs": float(n), "epochs_slowest": float(k), "excess_fraction_mean": mean}
    top = sorted(tally, key=lambda r: (-len(tally[r]), -sum(f.share for f in tally[r])))[:STRAGGLER_TOP]
    evidence |= {f"rank{r}_epochs_slowest": float(len(tally[r])) for r in top}
    # compute is a piece of the account's ``step``: the verdict claims step seconds (``partition``)
    return case.verdict(
        share, message, action, subject=f"rank {rank}", evidence=evidence, part=shown.account_part
    )


RULES = (
    Rule("STRAGGLER", ("ranks",), 0.10,
         "every rank waits for the slowest in each collective: a tenth of an epoch is lost on all of them",
         straggler),
)  # fmt: skip
