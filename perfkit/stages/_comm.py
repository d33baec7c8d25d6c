"""What a stage epoch spent held by collectives, and where in the step a slow rank is slow.

Two pure readings of a ``StageWindow``, for the verdicts and the metrics:

* ``communication(window)``: the exposed communication -- each rank's waits in collectives (FSDP's
  all-gathers and reduce-scatters, a script's all-reduce: the overlay ``collective_wait``; DDP's
  gradient all-reduce: ``sync_wait``, an all-reduce in backward here) -- as a share of the epoch, by
  step part, by collective, with the bytes and calls per step. What helps follows from where it
  is: an all-gather waited for in forward is the next layer's parameters not prefetched
  (``reshard_after_forward=False`` keeps them where memory allows; larger shards mean fewer
  all-gathers), a reduce-scatter in backward the gradients' traffic.
* ``straggler_parts(window)``: among several ranks, the one with the most compute (its step less
  its waits) and, per step part, how far its compute exceeds the others' median, with the others'
  waits by collective and by part: the slow rank's forward shows as the others' wait in the next
  layer's all-gather.

Both read the account each rank sent (``StageWindow.ranks``; above ``EXACT_MAX`` ranks, the step's
parts and the waits by part travel in every rank's row, the waits by collective with the slowest
ranks' details only).
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..names import BACKWARD, COLLECTIVE_WAIT, REST, STEP_PART, STEP_PARTS, SYNC_WAIT, step_series
from ._account import Account
from ._collective_account import BYTES, CALLS, WAIT_BY_COLLECTIVE, WAIT_BY_PART
from ._window import StageWindow

DDP_ALL_REDUCE = "all_reduce"
"""The collective DDP's gradient sync is (its wait, ``sync_wait``, falls in backward)."""
STRAGGLER_PARTS = (*STEP_PARTS, REST)
"""The parts of a step a slow rank's excess is located in."""


@dataclass(frozen=True)
class Communication:
    """A stage epoch's exposed waits in collectives, the mean over its ranks (see the module).

    ``wait_s`` of ``wall_s``; ``by_part`` where the ranks waited (a step part, ``rest``: in a step
    but in no part, ``outside``: between steps); ``by_collective`` in which collective;
    ``bytes_per_step`` and ``calls_per_step`` by collective, per rank; ``steps`` per rank;
    ``rank_wait_s`` each rank's wait (empty for one rank).
    """

    wait_s: float
    wall_s: float
    by_part: Mapping[str, float]
    by_collective: Mapping[str, float]
    bytes_per_step: Mapping[str, float]
    calls_per_step: Mapping[str, float]
    steps: float
    rank_wait_s: tuple[float, ...] = ()

    @property
    def share(self) -> float:
        """The waits' share of the epoch's wall time (0 for an empty window)."""
        return self.wait_s / self.wall_s if self.wall_s > 0 else 0.0

    @property
    def top(self) -> str | None:
        """The collective waited for longest (None where none was waited for)."""
        return max(self.by_collective, key=self.by_collective.__getitem__) if self.by_collective else None


def communication(window: StageWindow) -> Communication | None:
    """The exposed communication of ``window`` (see the module); None where no collective was timed.

    >>> import perfkit
    >>> from perfkit.stages import Account, StageWindow
    >>> reg = perfkit.Registry()
    >>> t = reg.clock()
    >>> for i in range(4):
    ...     reg.record("train.step", t, t + 10_000_000)
    ...     reg.record("dist.wait.forward.all_gather", t, t + 3_000_000)
    ...     reg.gauge("dist.bytes.all_gather", 1e6)
    >>> snap = reg.snapshot()
    >>> account = perfkit.stages.stage_account(snap, "train", "train", wall_s=0.05)
    >>> w = StageWindow("train", 0, snap, 0.05, account)
    >>> c = communication(w)
    >>> round(c.share, 2), c.top, c.bytes_per_step
    (0.24, 'all_gather', {'all_gather': 1000000.0})
    """
    a = window.account
    if not _timed(a):
        return None
    by_part, by_collective = _waits(a)
    steps = _steps(window)
    per_step = 1 / steps if steps else 0.0
    return Communication(
        wait_s=sum(by_part.values()),
        wall_s=a.wall_s,
        by_part=by_part,
        by_collective=by_collective,
        bytes_per_step={k: v * per_step for k, v in a.subjects.get(BYTES, {}).items()},
        calls_per_step={k: v * per_step for k, v in a.subjects.get(CALLS, {}).items()},
        steps=steps,
        rank_wait_s=tuple(sum(_waits(r.account)[0].values()) for r in window.ranks),
    )


@dataclass(frozen=True)
class StragglerParts:
    """Where in the step the slow rank of an epoch is slow (see the module).

    ``rank`` has the most compute in its steps; ``excess_s`` by step part: its compute there less the
    other ranks' median, over the epoch (its waits taken out); ``others_wait_s`` by collective and
    ``others_wait_by_part`` by where they waited: the other ranks' mean; ``steps`` per rank (for
    figures per step); ``wall_s`` the slow rank's.
    """

    rank: int
    excess_s: Mapping[str, float]
    others_wait_s: Mapping[str, float]
    others_wait_by_part: Mapping[str, float]
    steps: float
    wall_s: float

    @property
    def part(self) -> str:
        """The step part where the slow rank's excess is largest."""
        return max(self.excess_s, key=self.excess_s.__getitem__)


def straggler_parts(window: StageWindow) -> StragglerParts | None:
    """The slow rank of ``window`` and where in its step it is slow; None for fewer than two ranks,
    or where a rank's step parts or its waits were not measured (compute cannot be told from waiting).
    """
    ranks = window.ranks
    if len(ranks) < 2 or not all(STEP_PART in r.account.subjects and _timed(r.account) for r in ranks):
        return None
    compute = [_compute(r.account) for r in ranks]
    slow = max(range(len(ranks)), key=lambda i: sum(compute[i].values()))
    others = [i for i in range(len(ranks)) if i != slow]
    excess = {
        part: compute[slow].get(part, 0.0) - statistics.median(compute[i].get(part, 0.0) for i in others)
        for part in STRAGGLER_PARTS
    }
    waits = [_waits(ranks[i].account) for i in others]
    return StragglerParts(
        rank=ranks[slow].rank,
        excess_s=excess,
        others_wait_s=_mean([w[1] for w in waits if w[1]]),
        others_wait_by_part=_mean([w[0] for w in waits]),
        steps=statistics.fmean(ranks[i].steps for i in others),
        wall_s=ranks[slow].wall_s,
    )


def _timed(a: Account) -> bool:
    """Whether any wait in collectives was measured in ``a``."""
    return SYNC_WAIT in a.overlays or COLLECTIVE_WAIT in a.overlays or bool(a.subjects.get(WAIT_BY_PART))


def _waits(a: Account) -> tuple[dict[str, float], dict[str, float]]:
    """The rank's waits by part and by collective, DDP's gradient all-reduce an all-reduce in backward."""
    by_part = dict(a.subjects.get(WAIT_BY_PART, {}))
    by_collective = dict(a.subjects.get(WAIT_BY_COLLECTIVE, {}))
    ddp = a.overlays.get(SYNC_WAIT, 0.0)
    if ddp:
        by_part[BACKWARD] = by_part.get(BACKWARD, 0.0) + ddp
        by_collective[DDP_ALL_REDUCE] = by_collective.get(DDP_ALL_REDUCE, 0.0) + ddp
    return by_part, by_collective


def _compute(a: Account) -> dict[str, float]:
    """The rank's own compute in each part of its steps: the part less the waits in it."""
    waited = _waits(a)[0]
    return {part: max(0.0, s - waited.get(part, 0.0)) for part, s in a.subjects[STEP_PART].items()}


def _steps(window: StageWindow) -> float:
    """Steps per rank."""
    if window.ranks:
        return statistics.fmean(r.steps for r in window.ranks)
    step = window.snapshot.get(step_series(window.stage))
    return float(step.count) if step is not None else 0.0


def _mean(maps: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """The mean of ``maps`` key by key (a map without a key counts 0 there)."""
    out: dict[str, float] = {}
    for m in maps:
        for k, v in m.items():
            out[k] = out.get(k, 0.0) + v / len(maps)
    return out
