"""One owner per second: a stage epoch's verdicts as disjoint pieces of its wall time.

The rules judge a stage epoch independently, so two of them can describe the same seconds:
evaluation slower than training *because* its loader waits, a section *inside* the step that
COMPUTE_BOUND also counts, steps that got slower *because* something grows. Left as they are,
the user reads one cause three times, with three actions, and the symptom can rank above the
cause. ``partition`` makes the verdicts of one epoch a partition of its time:

1. **Symptoms become context.** EVAL_SLOWER_THAN_TRAIN names the account part that explains the
   difference; REGRESSION is the step growing. Where a cause claims that part, the symptom is
   folded into it (``Verdict.context``: "validation takes 3.0x training's time per sample")
   and is no verdict of its own; where no cause does, it stays, claiming that part.
2. **The most specific cause owns a second.** Each verdict claims seconds of one account part
   (``Verdict.part``); verdicts are served most specific first (a named section before the
   step as a whole, a loader's start before its steady wait) and each takes at most what its
   part has left. So the shares of an epoch's verdicts never add up to more than 100%.
3. **A leak that slows the steps says so**: where MEMORY_GROWTH fired on the epoch, the step
   verdict's context says the memory grew too.

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

SYMPTOMS = ("EVAL_SLOWER_THAN_TRAIN", "REGRESSION")
"""Kinds that describe an effect: folded into the verdict of their cause where one fired."""

GENERAL = {"INPUT_BOUND": 1, "COMPUTE_BOUND": 2, "EVAL_SLOWER_THAN_TRAIN": 3, "REGRESSION": 3, "RESIDUAL": 4}
"""How general a kind's claim is (higher: served later); every other kind names one thing (0)."""

_PART_WORDS = {
    "data wait": "data_wait",
    "step": "step",
    "callbacks": "callbacks",
    "loader setup": "loader_setup",
}


def partition(verdicts: Sequence[Verdict], budget: Mapping[str, float]) -> list[Verdict]:
    """The verdicts of one stage epoch made disjoint; ``budget`` is each account part's share of it.

    Returns them most specific first; each share is at most what its part had left.
    """
    folded = _fold_symptoms(list(verdicts))
    left = dict(budget)
    out = []
    for v in sorted(folded, key=lambda v: (GENERAL.get(v.kind, 0), -v.share)):
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


def _fold_symptoms(verdicts: list[Verdict]) -> list[Verdict]:
    causes = [v for v in verdicts if v.kind not in SYMPTOMS]
    memory = next((v for v in verdicts if v.kind == "MEMORY_GROWTH"), None)
    kept: list[Verdict] = []
    for symptom in (v for v in verdicts if v.kind in SYMPTOMS):
        part = _explained_part(symptom)
        owners = [c for c in causes if c.part == part]
        if not owners:
            alone = replace(symptom, part=part)
            if memory is not None and symptom.kind == "REGRESSION":
                alone = _with_context(alone, memory.message, {})
            kept.append(alone)
            continue
        cause = max(owners, key=lambda c: c.share)
        causes[causes.index(cause)] = _with_context(cause, symptom.message, symptom.evidence)
    if memory is not None:  # a leak whose cost shows in the step: the step's verdict says so
        for i, c in enumerate(causes):
            if c.part == "step" and any(s.kind == "REGRESSION" for s in verdicts):
                causes[i] = _with_context(c, memory.message, {})
    return [*causes, *kept]


def _explained_part(symptom: Verdict) -> str:
    """The account part a symptom's difference lies in (REGRESSION: the step)."""
    if symptom.kind == "REGRESSION":
        return "step"
    words = (symptom.subject or "other").split(" (")[0]  # "data wait", "step (postprocess)"
    return words.replace(" ", "_")


def _with_context(cause: Verdict, said: str, evidence: Mapping[str, float]) -> Verdict:
    context = f"{cause.context}; {said}" if cause.context else said
    return replace(cause, context=context, evidence={**cause.evidence, **evidence})
