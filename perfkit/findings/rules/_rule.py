"""The shape of a rule that judges a stage epoch: what it reads, its threshold, how it shares the
epoch's seconds with the others, and what it proposes.

A rule is data plus two functions, as torch.profiler's ``_pattern_matcher`` keeps ``match`` apart
from ``benchmark``. Its ``judge`` finds: given the epoch (a ``Case``) and the rule's own
``threshold``, it returns nothing, a ``Verdict`` (or several), or an ``Abstention``; it never
compares against a constant of its own, so the threshold is declared once and changing it changes
the rule. Its ``propose``, where it has one, advises: it runs on each verdict left once the
epoch's seconds are partitioned (``_partition``), and gives the action with its change and gain
(a ``workers.Proposal``). The partition reads the rest from the rule: the part its verdicts
``claims``, how general that claim is (``generality``), whether it is a ``symptom`` (and of
which part: ``explained_by``), and the part its cause ``slows`` without claiming it.

    >>> def busy(case: Case, minimum: float) -> Verdict | None:
    ...     share = case.fraction("step")
    ...     return case.verdict(share, "the step is busy", "rest") if share >= minimum else None
    >>> rule = Rule("BUSY", ("step",), 0.5, "half the epoch", busy, claims="step")
    >>> rule.kind, rule.threshold, rule.generality, rule.symptom
    ('BUSY', 0.5, 0, False)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

from ..._rule import Abstention, Outcome, Verdict, check_kind, stamped
from .._case import Case
from ..workers import Proposal

Judge = Callable[[Case, float], Outcome | Iterable[Verdict | Abstention]]
"""``judge(case, threshold)``: what one rule finds on one stage epoch."""
Propose = Callable[[Case, Verdict], Proposal]
"""``propose(case, verdict)``: the change a verdict proposes, its gain and the action in words."""


@dataclass(frozen=True)
class Rule:
    """One rule of a stage epoch: ``judge`` concludes ``kind`` once ``threshold`` is crossed, for
    reason ``why``; the fields after ``judge`` say how its verdicts share the epoch and advise."""

    kind: str
    reads: tuple[str, ...]
    threshold: float
    why: str
    judge: Judge
    claims: str | None = None
    """The account part whose seconds its verdicts explain (a judge may name another per verdict)."""
    generality: int = 0
    """How general its claim is, for the partition: 0 names one thing (a section, a callback, the
    epoch's start) and is served first; higher claims (the steady data wait, the step as a whole,
    symptoms, what no timer covers) take what the more specific ones left."""
    symptom: bool = False
    """Its verdicts describe an effect (evaluation slower than training, steps that got slower):
    folded into the verdict of the cause that claims the part that explains them, where one fired."""
    explained_by: str | None = None
    """A symptom's explaining part where it is always the same (steps that got slower: the step);
    None: the part its verdict's subject names ("data wait", "step (postprocess)")."""
    slows: str | None = None
    """The part its cause slows without claiming its seconds (a leak slows the steps): where a
    symptom of that part fired, the verdicts on the part say this one's message too."""
    propose: Propose | None = None
    """The advice step, run after the partition; None: the judge's action stands."""

    def __post_init__(self) -> None:
        check_kind(self.kind)

    def find(self, case: Case) -> list[Verdict | Abstention]:
        """What the judge concludes on ``case`` at this rule's threshold, stamped with its kind."""
        return stamped(self.judge(case, self.threshold), self.kind, self.claims)

    def advise(self, case: Case, v: Verdict) -> Verdict:
        """``v`` with what this rule proposes: the action, the change, and its gain (within [0, share])."""
        if self.propose is None:
            return v
        p = self.propose(case, v)
        gain = (
            None if p.gain is None else (max(0.0, min(v.share, p.gain[0])), max(0.0, min(v.share, p.gain[1])))
        )
        return replace(v, action=p.said, change=dict(p.change), gain=gain)

    def apply(self, case: Case) -> list[Verdict | Abstention]:
        """The rule judged alone: its verdicts, each advised (a diagnosis partitions them first)."""
        return [self.advise(case, x) if isinstance(x, Verdict) else x for x in self.find(case)]
