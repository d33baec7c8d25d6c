"""One owner per second: a stage epoch's verdicts as disjoint pieces of its wall time.

The rules judge a stage epoch independently, so two of them can describe the same seconds:
evaluation slower than training *because* its loader waits, a section *inside* the step that
COMPUTE_BOUND also counts, steps that got slower *because* something grows. Left as they are,
the user reads one cause three times, with three actions, and the symptom can rank above the
cause. ``partition`` makes the verdicts of one epoch a partition of its time:

1. **Symptoms become context.** A rule that is a ``symptom`` (EVAL_SLOWER_THAN_TRAIN,
   REGRESSION) names the account part that explains its difference (its ``explained_by``, else
   the one its subject names). Where a cause claims that part, the symptom is folded into it
   (``Verdict.context``: "validation takes 3.0x training's time per sample") and is no verdict
   of its own; where no cause does, it stays, claiming that part.
2. **The most specific cause owns a second.** Each verdict claims seconds of one account part
   (``Verdict.part``); verdicts are served most specific first (by their rule's ``generality``:
   a named section before the step as a whole, a loader's start before its steady wait) and
   each takes at most what its part has left. So the shares of an epoch's verdicts never add up
   to more than 100%.
3. **A cause that slows a part says so**: where a rule that ``slows`` a part fired (a leak slows
   the steps: MEMORY_GROWTH) and a symptom of that part did too, the verdicts on that part say
   the cause's message as context.

Everything the partition knows of a kind it reads from the kind's rule (``rules``); the rules'
advice comes after it (``Rule.advise``), on the verdicts it leaves.

    >>> from perfkit._rule import verdict
    >>> from dataclasses import replace
    >>> step = replace(verdict(0.6, "the step is 60%"), kind="COMPUTE_BOUND", part="step")
    >>> section = replace(verdict(0.4, "section f is 40%"), kind="SLOW_SECTION", part="step")
    >>> [(v.kind, round(v.share, 2)) for v in partition([step, section], {"step": 0.6})]
    [('SLOW_SECTION', 0.4), ('COMPUTE_BOUND', 0.2)]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from .._rule import Verdict, severity
from .rules import RULES, Rule


def partition(
    verdicts: Sequence[Verdict], budget: Mapping[str, float], rules: Sequence[Rule] = RULES
) -> list[Verdict]:
    """The verdicts of one stage epoch made disjoint; ``budget`` is each account part's share of it;
    ``rules``: the rules that found them (every verdict's kind is one of theirs).

    Returns them most specific first; each share is at most what its part had left.
    """
    of = {r.kind: r for r in rules}
    folded = _fold_symptoms(list(verdicts), of)
    left = dict(budget)
    out = []
    for v in sorted(folded, key=lambda v: (of[v.kind].generality, -v.share)):
        if v.part is None or v.part not in left:
            out.append(v)
            continue
        share = min(v.share, max(0.0, left[v.part]))
        left[v.part] -= share
        if share <= 0:
            continue  # every second it described has a more specific owner
        scale = share / v.share if v.share > 0 else 0.0
        gain = None if v.gain is None else (min(v.gain[0], share), min(v.gain[1], share))
        out.append(
            replace(v, share=share, run_share=v.run_share * scale, severity=severity(share), gain=gain)
        )
    return out


def _fold_symptoms(verdicts: list[Verdict], of: Mapping[str, Rule]) -> list[Verdict]:
    causes = [v for v in verdicts if not of[v.kind].symptom]
    symptoms = [replace(v, part=_explained_part(v, of[v.kind])) for v in verdicts if of[v.kind].symptom]
    slowing = [(v, of[v.kind].slows) for v in verdicts if of[v.kind].slows is not None]
    kept: list[Verdict] = []
    for symptom in symptoms:
        owners = [c for c in causes if c.part == symptom.part]
        if not owners:
            for cause, part in slowing:  # a symptom of what a cause slows: it says so
                if part == symptom.part:
                    symptom = _with_context(symptom, cause.message, {})
            kept.append(symptom)
            continue
        cause = max(owners, key=lambda c: c.share)
        causes[causes.index(cause)] = _with_context(cause, symptom.message, symptom.evidence)
    for cause, part in slowing:  # a cause whose cost shows in a part: that part's verdicts say so
        if any(s.part == part for s in symptoms):
            causes = [_with_context(c, cause.message, {}) if c.part == part else c for c in causes]
    return [*causes, *kept]


def _explained_part(symptom: Verdict, rule: Rule) -> str:
    """The account part a symptom's difference lies in: its rule's ``explained_by`` (REGRESSION:
    the step), else the one its subject names ("data wait", "step (postprocess)")."""
    if rule.explained_by is not None:
        return rule.explained_by
    words = (symptom.subject or "other").split(" (")[0]
    return words.replace(" ", "_")


def _with_context(cause: Verdict, said: str, evidence: Mapping[str, float]) -> Verdict:
    context = f"{cause.context}; {said}" if cause.context else said
    return replace(cause, context=context, evidence={**cause.evidence, **evidence})
