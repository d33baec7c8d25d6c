"""Rules and what they conclude: one shape for a run's verdicts and a trace's findings.

A rule is a small object (torch.profiler's ``_pattern_matcher`` is the model): the kind of
conclusion it draws, the signals it reads, a threshold with the reason for it, and a judge.
The judge looks at one subject (a stage epoch, a profiler trace's analysis) and answers one
of three ways: nothing (``None``: below the threshold), a ``Verdict`` (or several, one per
section over the threshold), or an ``Abstention`` naming the input it lacked, for a rule that
cannot tell must not guess. A judge never spells its own kind: ``Rule.apply`` stamps the
rule's kind on what the judge returns (``stamped``), so each kind is written once, in its rule
list (``kinds`` checks it is written once).

``Rule`` here judges one subject alone (a trace's analysis, an interval of a long epoch). A
stage epoch's rules (``perfkit.findings.Rule``) have the same fields and more: their judge is
given their threshold, and they say how their verdicts share the epoch's seconds and what they
propose; they stamp and check their kinds with the same functions.

    >>> def wait(share: float) -> Verdict | None:
    ...     return verdict(share, "the loop waits for data", "add workers") if share >= 0.1 else None
    >>> rule = Rule("INPUT_BOUND", ("data_wait",), 0.1, "below a tenth, workers buy little", wait)
    >>> [v.line for v in rule.apply(0.4)]
    ['INPUT_BOUND (40% of the time judged): the loop waits for data -> add workers']
    >>> rule.apply(0.05)
    []

It sits in the recording core because both ``perfkit.trace`` (below the run directory) and
``perfkit.findings`` (above it) judge with it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any, Generic, Protocol, TypeVar

_KIND = re.compile(r"[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)*")

S = TypeVar("S", contravariant=True)


def severity(share: float) -> str:
    """``high`` from 30% of the time, ``medium`` from 10%, else ``low``.

    >>> severity(0.42), severity(0.12), severity(0.01)
    ('high', 'medium', 'low')
    """
    return "high" if share >= 0.3 else "medium" if share >= 0.1 else "low"


@dataclass(frozen=True)
class Verdict:
    """One cause of slowness, in words and numbers: what a rule concludes.

    ``share`` is the fraction of the judged time the cause explains: a stage epoch's wall time
    for a run's verdict, the profiled steps' time for a trace's (``stage`` is then empty and
    ``epoch`` -1). ``run_share`` weighs it by the stage's part of the run; verdicts are ranked
    by it.

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
    evidence: Mapping[str, float] = field(default_factory=dict)
    action: str = ""
    part: str | None = None
    """The account part whose seconds ``share`` claims (``data_wait``, ``step``...); None for a
    verdict that claims no time (memory growth) or a trace's."""
    context: str = ""
    """What else was seen that this cause explains (a symptom: evaluation slower than training,
    steps slower than an earlier epoch), said before the message."""
    change: Mapping[str, Any] = field(default_factory=dict)
    """The change to make, machine-readable (``{"loader": "train", "num_workers": 3}``,
    ``{"torch_threads": 1}``); empty when the action is not one setting."""
    gain: tuple[float, float] | None = None
    """What ``change`` is expected to save, (low, high) as fractions of the judged time (never
    above ``share``); ``run_gain`` is the same of the run."""

    @property
    def run_gain(self) -> tuple[float, float] | None:
        """``gain`` as fractions of the run: weighed by the stage's part of it, as ``run_share``."""
        if self.gain is None:
            return None
        weight = self.run_share / self.share if self.share > 0 else 0.0
        return (self.gain[0] * weight, self.gain[1] * weight)

    def to_dict(self) -> dict[str, Any]:
        """Every field in order (mappings copied, pairs as lists), then ``run_gain``."""
        gain, run_gain = self.gain, self.run_gain
        return {
            **{f.name: getattr(self, f.name) for f in fields(self)},
            "evidence": dict(self.evidence),
            "change": dict(self.change),
            "gain": None if gain is None else list(gain),
            "run_gain": None if run_gain is None else list(run_gain),
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
            part=None if data.get("part") is None else str(data["part"]),
            context=str(data.get("context", "")),
            change=dict(data.get("change") or {}),
            gain=_pair(data.get("gain")),
        )

    @property
    def where(self) -> str:
        """What ``share`` is a fraction of, in words: ``42% of val epoch 1``."""
        judged = f"{self.stage} epoch {self.epoch}" if self.stage else "the time judged"
        return f"{self.share:.0%} of {judged}"

    @property
    def said(self) -> str:
        """The message, after its context where a symptom was folded into this cause."""
        return f"{self.context}; {self.message}" if self.context else self.message

    @property
    def text(self) -> str:
        """The message and the action in one sentence, as a trace's findings list them."""
        return f"{self.said}: {self.action}" if self.action else self.said

    @property
    def line(self) -> str:
        """The verdict in one line: kind, share, message, and what to do."""
        action = f" -> {self.action}" if self.action else ""
        return f"{self.kind} ({self.where}): {self.said}{action}"


def _pair(value: object) -> tuple[float, float] | None:
    if isinstance(value, (list, tuple)) and len(value) == 2:
        return (float(value[0]), float(value[1]))
    return None


@dataclass(frozen=True)
class Abstention:
    """A rule that could not judge, and the signal it lacked."""

    rule: str
    stage: str
    epoch: int
    missing: str

    def to_dict(self) -> dict[str, Any]:
        return {"rule": self.rule, "stage": self.stage, "epoch": self.epoch, "missing": self.missing}


Outcome = Verdict | Abstention | None
"""What a judge returns for one subject; a judge that can find several returns an iterable of
verdicts (a generator yields an abstention instead when it cannot judge)."""


def verdict(
    share: float,
    message: str,
    action: str = "",
    *,
    subject: str | None = None,
    evidence: Mapping[str, float] | None = None,
    stage: str = "",
    epoch: int = -1,
    weight: float = 1.0,
    part: str | None = None,
    change: Mapping[str, Any] | None = None,
    gain: tuple[float, float] | None = None,
) -> Verdict:
    """A verdict for a judge to return: its rule gives it its kind (and its part, unless ``part``
    names another). ``share`` is clamped to [0, 1], ``gain`` to [0, share]."""
    share = max(0.0, min(1.0, share))
    if gain is not None:
        gain = (max(0.0, min(share, gain[0])), max(0.0, min(share, gain[1])))
    return Verdict(
        "",
        stage,
        epoch,
        subject,
        share,
        share * weight,
        severity(share),
        message,
        dict(evidence or {}),
        action,
        part,
        change=dict(change or {}),
        gain=gain,
    )


@dataclass(frozen=True)
class Rule(Generic[S]):
    """One rule: ``judge(subject)`` concludes ``kind`` once ``threshold`` is crossed, for reason ``why``."""

    kind: str
    reads: tuple[str, ...]
    threshold: float
    why: str
    judge: Callable[[S], Outcome | Iterable[Verdict | Abstention]]
    claims: str | None = None
    """The account part whose seconds its verdicts explain (a judge may name another per verdict)."""

    def __post_init__(self) -> None:
        check_kind(self.kind)

    def apply(self, subject: S) -> list[Verdict | Abstention]:
        """The judge's outcomes for ``subject``, each stamped with this rule's kind (often none)."""
        return stamped(self.judge(subject), self.kind, self.claims)


def check_kind(kind: object) -> None:
    """A kind is UPPER_SNAKE_CASE: it names a cause in the verdicts' JSON and in the text."""
    if not isinstance(kind, str) or not _KIND.fullmatch(kind):
        raise ValueError(f"kind must be UPPER_SNAKE_CASE, got {kind!r}")


def stamped(
    out: Outcome | Iterable[Verdict | Abstention], kind: str, claims: str | None
) -> list[Verdict | Abstention]:
    """What a judge returned, as a list, each outcome stamped with its rule's ``kind`` (and a
    verdict with the part its rule ``claims``, unless the judge named another)."""
    found: Iterable[Verdict | Abstention] = (
        () if out is None else (out,) if isinstance(out, (Verdict, Abstention)) else out
    )
    return [
        replace(x, kind=kind, part=x.part or claims) if isinstance(x, Verdict) else replace(x, rule=kind)
        for x in found
    ]


class Kinded(Protocol):
    """Anything that declares a kind: a rule of any shape."""

    @property
    def kind(self) -> str: ...


def kinds(rules: Iterable[Kinded]) -> tuple[str, ...]:
    """The kinds of ``rules`` in order; a kind declared by two rules of one list is an error.

    >>> kinds([Rule("A", (), 0.0, "", lambda s: None), Rule("B", (), 0.0, "", lambda s: None)])
    ('A', 'B')
    """
    seen: list[str] = []
    for rule in rules:
        if rule.kind in seen:
            raise ValueError(f"kind {rule.kind!r} is declared by two rules")
        seen.append(rule.kind)
    return tuple(seen)
