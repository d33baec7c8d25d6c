"""Verdicts: the causes of a slow stage, each with its share of the time, the evidence and what to do.

A ``Verdict`` is what one rule concludes about one stage epoch. ``share`` is the fraction of
that epoch's wall time the cause explains; ``run_share`` the fraction of the run's measured
time (the stage's share of the run times ``share``), which is what verdicts are ranked by.
A rule whose inputs are missing does not guess: it abstains, and says which signal it lacked.
The JSON of a ``Diagnosis`` (``perfkit summary RUN_DIR --json``) is a stable, documented
format (docs/diagnosis.md): users gate CI on it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

KINDS = (
    "INPUT_BOUND",
    "EPOCH_BOUNDARY",
    "LOADER_SETUP",
    "COMPUTE_BOUND",
    "SLOW_SECTION",
    "CALLBACK_OVERHEAD",
    "EVAL_SLOWER_THAN_TRAIN",
    "STRAGGLER",
    "REGRESSION",
    "MEMORY_GROWTH",
)
"""Every kind of verdict, as ``Verdict.kind`` spells it."""

FORMAT = 1
"""The version of the JSON a ``Diagnosis`` writes; fields are only ever added within a version."""


def severity(share: float) -> str:
    """``high`` from 30% of the time, ``medium`` from 10%, else ``low``.

    >>> severity(0.42), severity(0.12), severity(0.01)
    ('high', 'medium', 'low')
    """
    return "high" if share >= 0.3 else "medium" if share >= 0.1 else "low"


@dataclass(frozen=True)
class Verdict:
    """One cause of slowness in one stage epoch, in words and numbers.

    >>> v = Verdict("INPUT_BOUND", "val", 1, "val", 0.42, 0.21, "high", "...", {"wait_fraction": 0.5}, "...")
    >>> Verdict.from_dict(v.to_dict()) == v
    True
    """

    kind: str
    stage: str
    epoch: int
    subject: str | None
    share: float
    run_share: float
    severity: str
    message: str
    evidence: Mapping[str, float]
    action: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "stage": self.stage,
            "epoch": self.epoch,
            "subject": self.subject,
            "share": self.share,
            "run_share": self.run_share,
            "severity": self.severity,
            "message": self.message,
            "evidence": dict(self.evidence),
            "action": self.action,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Verdict:
        subject = data.get("subject")
        return cls(
            kind=str(data["kind"]),
            stage=str(data["stage"]),
            epoch=int(data["epoch"]),
            subject=None if subject is None else str(subject),
            share=float(data["share"]),
            run_share=float(data["run_share"]),
            severity=str(data["severity"]),
            message=str(data["message"]),
            evidence={str(k): float(v) for k, v in dict(data["evidence"]).items()},
            action=str(data["action"]),
        )

    @property
    def line(self) -> str:
        """The verdict in one line: kind, share, message, and what to do."""
        where = f"{self.share:.0%} of {self.stage} epoch {self.epoch}"
        return f"{self.kind} ({where}): {self.message} -> {self.action}"


@dataclass(frozen=True)
class Abstention:
    """A rule that could not judge a stage epoch, and the signal it lacked."""

    rule: str
    stage: str
    epoch: int
    missing: str

    def to_dict(self) -> dict[str, Any]:
        return {"rule": self.rule, "stage": self.stage, "epoch": self.epoch, "missing": self.missing}


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
    stages: tuple[StageSummary, ...] = ()
    memory_peaks_mb: Mapping[str, float] = field(default_factory=dict)
    lost: Mapping[str, float] = field(default_factory=dict)

    @property
    def top(self) -> Verdict | None:
        """The verdict that explains the largest share of the run's time."""
        return self.verdicts[0] if self.verdicts else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "verdicts": [v.to_dict() for v in self.verdicts],
            "abstained": [a.to_dict() for a in self.abstentions],
            "stages": {s.stage: s.to_dict() for s in self.stages},
            "memory_peaks_mb": dict(self.memory_peaks_mb),
            "lost": dict(self.lost),
        }
