"""What one stage epoch came to: its snapshot, wall time, samples, slowest steps and time account.

``StageWindow`` is what a ``StageRecorder`` hands its listeners when a stage epoch ends,
what sinks receive, and what the run directory stores (``to_dict`` / ``from_dict``).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from .._rule import Verdict
from .._snapshot import Snapshot
from ._account import Account

SCOPES = ("epoch", "interval", "warmup")
"""What a window spans: a whole stage epoch; an interval of an epoch in progress (N steps or T
seconds of it, ``perfkit.stages.Intervals``); the warm-up steps left out before the first interval."""


@dataclass(frozen=True)
class SlowStep:
    """One of the slowest steps of a stage, with the user's tags for that batch."""

    stage: str
    epoch: int
    batch_idx: int
    rank: int
    duration_s: float
    tags: Mapping[str, float] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SlowStep:
        """Read what ``dataclasses.asdict`` wrote."""
        return cls(
            stage=str(data["stage"]),
            epoch=int(data["epoch"]),
            batch_idx=int(data["batch_idx"]),
            rank=int(data.get("rank", 0)),
            duration_s=float(data["duration_s"]),
            tags={str(k): float(v) for k, v in dict(data.get("tags") or {}).items()},
        )


def keep_slowest(heap: list[Any], entry: tuple[Any, ...], k: int) -> None:
    """Keep in ``heap`` the ``k`` largest entries seen (entries compare by their first item)."""
    if len(heap) < k:
        heapq.heappush(heap, entry)
    elif entry[0] > heap[0][0]:
        heapq.heapreplace(heap, entry)


@dataclass(frozen=True)
class RankPart:
    """What one rank measured of a stage epoch (under DDP each rank has one)."""

    rank: int
    wall_s: float
    steps: int
    step_mean_s: float
    account: Account


@dataclass(frozen=True)
class StageWindow:
    """One epoch of one stage: its snapshot (merged over ranks), wall time, samples and account.

    ``wall_s`` excludes other stages run inside it (validation inside a training epoch), whose
    time is ``nested_s``. ``loader`` names the loader series when it is not the stage's own
    (the sanity check reads validation's loader). ``ranks`` holds each rank's part when several
    ranks took part, in rank order; ``account`` is then the mean over ranks. ``missing_ranks``:
    the ranks that did not answer the merge in time (the figures are then this rank's alone).
    ``reference_s_per_sample`` is training's time per sample, for the other stages' ratio.
    ``scope`` is ``epoch`` for a whole stage epoch, ``interval`` (or ``warmup``) for a piece of
    one still running, whose steps of the epoch are ``steps`` (first, last); an interval is this
    rank's alone, and carries the ``verdicts`` its monitor judged (provisional). ``stage_guess``
    says, where the stage was guessed rather than told (``perfkit run``), what it was guessed from.
    ``ends_epoch``: an interval cut as its epoch ended (the steps after the last cut), published
    just before the epoch's own window; it alone holds the epoch's one-off end (the loader's last
    call, its workers shutting down), so a monitor does not judge it as an interval in progress.
    """

    stage: str
    epoch: int
    snapshot: Snapshot
    wall_s: float
    account: Account
    samples: int | None = None
    loader: str | None = None
    slowest: tuple[SlowStep, ...] = ()
    ranks: tuple[RankPart, ...] = ()
    nested_s: float = 0.0
    reference_s_per_sample: float | None = None
    scope: str = "epoch"
    steps: tuple[int, int] | None = None
    verdicts: tuple[Verdict, ...] = ()
    missing_ranks: tuple[int, ...] = ()
    stage_guess: str | None = None
    ends_epoch: bool = False

    @property
    def is_interval(self) -> bool:
        """Whether the window is a piece of a stage epoch (an interval or the warm-up), not all of it."""
        return self.scope != "epoch"

    @property
    def s_per_sample(self) -> float | None:
        """Wall seconds per sample (None without a sample count)."""
        return self.wall_s / self.samples if self.samples else None

    @property
    def loader_name(self) -> str:
        """The name of the stage's loader series (``val`` for a sanity check)."""
        return self.loader or self.stage

    @property
    def rank_step_means_s(self) -> tuple[float, ...]:
        """Each rank's mean step time in rank order (NaN for a rank without steps); empty for one rank."""
        return tuple(r.step_mean_s if r.steps else math.nan for r in self.ranks)

    def to_dict(self) -> dict[str, Any]:
        """Everything but the snapshot, which the run directory keeps in a file of its own."""
        return {
            "stage": self.stage,
            "epoch": self.epoch,
            "wall_s": self.wall_s,
            "samples": self.samples,
            "loader": self.loader,
            "nested_s": self.nested_s,
            "reference_s_per_sample": self.reference_s_per_sample,
            "account": self.account.to_dict(),
            "ranks": [{**asdict(r), "account": r.account.to_dict()} for r in self.ranks],
            "slowest": [asdict(s) for s in self.slowest],
            **({"missing_ranks": list(self.missing_ranks)} if self.missing_ranks else {}),
            **({"stage_guess": self.stage_guess} if self.stage_guess else {}),
            # an epoch's line is as it was before intervals existed
            **(
                {
                    "scope": self.scope,
                    "steps": list(self.steps or ()),
                    "verdicts": [v.to_dict() for v in self.verdicts],
                }
                if self.is_interval
                else {}
            ),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], snapshot: Snapshot) -> StageWindow:
        """Read ``to_dict``'s output back, with its snapshot."""
        return cls(
            stage=str(data["stage"]),
            epoch=int(data["epoch"]),
            snapshot=snapshot,
            wall_s=float(data["wall_s"]),
            account=Account.from_dict(data["account"]),
            samples=_int_or_none(data.get("samples")),
            loader=data.get("loader") if isinstance(data.get("loader"), str) else None,
            slowest=tuple(SlowStep.from_dict(s) for s in data["slowest"]),
            ranks=tuple(
                RankPart(
                    rank=int(r["rank"]),
                    wall_s=float(r["wall_s"]),
                    steps=int(r["steps"]),
                    step_mean_s=float(r["step_mean_s"]),
                    account=Account.from_dict(r["account"]),
                )
                for r in data["ranks"]
            ),
            nested_s=float(data.get("nested_s") or 0.0),
            reference_s_per_sample=_float_or_none(data.get("reference_s_per_sample")),
            scope=str(data.get("scope", "epoch")),
            steps=_steps(data.get("steps")),
            verdicts=tuple(Verdict.from_dict(v) for v in data.get("verdicts", ())),
            missing_ranks=tuple(int(r) for r in data.get("missing_ranks", ())),
            stage_guess=data["stage_guess"] if isinstance(data.get("stage_guess"), str) else None,
        )


def _steps(value: object) -> tuple[int, int] | None:
    if isinstance(value, list) and len(value) == 2 and all(isinstance(x, int) for x in value):
        return int(value[0]), int(value[1])
    return None


def _int_or_none(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _float_or_none(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)
