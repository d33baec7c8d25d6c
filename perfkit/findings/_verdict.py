"""A diagnosis: the verdicts on a run's stages, each with its share of the time, the evidence and what to do.

A ``Verdict`` (``perfkit._rule``: the one result type of every rule) is what one rule concludes
about one stage epoch. ``share`` is the fraction of
that epoch's wall time the cause explains; ``run_share`` the fraction of the run's measured
time (the stage's share of the run times ``share``), which is what verdicts are ranked by.
A rule whose inputs are missing does not guess: it abstains, and says which signal it lacked.
The JSON of a ``Diagnosis`` (``perfkit summary RUN_DIR --json``, ``verdicts.json``) is a stable,
documented format (docs/diagnosis.md; its number is ``DIAGNOSIS_FORMAT``): users gate CI on it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .._formats import DIAGNOSIS_FORMAT
from .._rule import Abstention, Verdict


@dataclass(frozen=True)
class StageSummary:
    """A stage over the run: its epochs, its wall time, and the account of its last epoch."""

    stage: str
    epochs: int
    wall_s: float
    last_epoch: int
    account: Mapping[str, float]
    account_fractions: Mapping[str, float]
    subjects: Mapping[str, Mapping[str, float]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "stage": self.stage,
            "epochs": self.epochs,
            "wall_s": self.wall_s,
            "last_epoch": self.last_epoch,
            "account_s": dict(self.account),
            "account_fraction": dict(self.account_fractions),
            "subjects_s": {k: dict(v) for k, v in self.subjects.items()},
        }


@dataclass(frozen=True)
class Diagnosis:
    """Everything perfkit concludes about a run: verdicts by rank, abstentions, per-stage accounts."""

    verdicts: tuple[Verdict, ...]
    abstentions: tuple[Abstention, ...] = ()
    context: tuple[Verdict, ...] = ()
    """Verdicts below the run's floor (``RUN_FLOOR``): true, but not worth acting on."""
    stages: tuple[StageSummary, ...] = ()
    memory_peaks_mb: Mapping[str, float] = field(default_factory=dict)
    lost: Mapping[str, float] = field(default_factory=dict)
    changes: tuple[Verdict, ...] = ()
    """The CHANGE verdicts of the run's interval windows, each once (the interval that first called
    it), oldest first: what moved while the run went on, from which step and when."""

    @property
    def top(self) -> Verdict | None:
        """The verdict that explains the largest share of the run's time."""
        return self.verdicts[0] if self.verdicts else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": DIAGNOSIS_FORMAT,
            "verdicts": [v.to_dict() for v in self.verdicts],
            "context": [v.to_dict() for v in self.context],
            "abstained": [a.to_dict() for a in self.abstentions],
            "stages": {s.stage: s.to_dict() for s in self.stages},
            "memory_peaks_mb": dict(self.memory_peaks_mb),
            "lost": dict(self.lost),
            "changes": [v.to_dict() for v in self.changes],
        }
