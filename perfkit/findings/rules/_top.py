"""``TopSubject``: the judge of every rule that names the largest subject of an account part.

A callback's hooks, the model's own hooks, checkpoint saving, a logger's methods: each is a
subject of the epoch's ``Account`` (seconds by owner within a part), and each rule says the same
thing of it: the owner with the most seconds, where they pass the rule's threshold of the epoch
(torch.profiler's ``NamePattern`` is the model: one class, one declaration per name). Its words
are ``str.format`` templates over the owner's ``name``, its ``share`` of the epoch, the ``stage``
and its ``seconds``; for subjects named ``OWNER.METHOD`` (``by_owner``) the owner is ranked by
all its methods and ``method`` and ``method_share`` name its largest.

    >>> judge = TopSubject("callbacks", "callback {name} takes {share:.0%}", "make {name} cheaper", "hook_s")
    >>> judge.subjects, judge.evidence
    ('callbacks', 'hook_s')
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ..._rule import Outcome
from ..._units import format_seconds
from ...names import display_name, stage_label
from .._case import Case


@dataclass(frozen=True)
class TopSubject:
    """The largest subject of the account's ``subjects`` over the threshold, in ``message`` and
    ``action``, its seconds in the evidence under ``evidence`` (and its largest method's under
    ``by_owner``); below ``floor_s_per_step`` seconds a step it is a short epoch's fixed cost."""

    subjects: str
    message: str
    action: str
    evidence: str
    by_owner: str | None = None
    floor_s_per_step: float = 0.0

    def __call__(self, case: Case, minimum: float) -> Outcome:
        found = case.window.account.subjects.get(self.subjects)
        if not found:  # nothing of that part was timed: nothing to judge
            return None
        if self.by_owner is None:
            owner, seconds = max(found.items(), key=lambda kv: kv[1])
            method, method_s, subject = owner, seconds, owner
        else:
            owner, spent = max(_by_owner(found).items(), key=lambda kv: sum(kv[1].values()))
            seconds = sum(spent.values())
            method, method_s = max(spent.items(), key=lambda kv: kv[1])
            subject = f"{owner}.{method}"
        share = seconds / case.wall_s if case.wall_s > 0 else 0.0
        if share < minimum or seconds < self.floor_s_per_step * max(1, case.steps):
            return None
        words = {
            "name": display_name(owner),
            "share": share,
            "stage": stage_label(case.stage),
            "seconds": format_seconds(seconds),
            "method": display_name(method),
            "method_share": method_s / seconds if seconds > 0 else 0.0,
        }
        evidence = {self.evidence: seconds}
        if self.by_owner is not None:
            evidence[self.by_owner] = method_s
        return case.verdict(
            share,
            self.message.format(**words),
            self.action.format(**words),
            subject=subject,
            evidence=evidence,
        )


def _by_owner(found: Mapping[str, float]) -> dict[str, dict[str, float]]:
    """Subjects named ``OWNER.METHOD``, by owner (a name without a dot is its own owner)."""
    owners: dict[str, dict[str, float]] = {}
    for name, seconds in found.items():
        owner, _, method = name.rpartition(".")
        owners.setdefault(owner or name, {})[method] = seconds
    return owners
