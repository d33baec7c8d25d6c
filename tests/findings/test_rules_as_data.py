"""A rule is data: its judge uses the threshold the rule declares, the partition reads how general
and whether a symptom it is from the rule, and its advice comes after the partition, on the share
its verdict kept. Hand-built epochs of one second (``test_rules``' fake clock)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import pytest

from perfkit.findings import RULES, Case, Rule, Verdict, judge
from perfkit.findings.workers import Proposal
from perfkit.names import hook_series

from .test_rules import Epoch, case, epoch, fires

__all__ = ["epoch"]  # the fixture, used by name


def rule(kind: str) -> Rule:
    [found] = [r for r in RULES if r.kind == kind]
    return found


def with_threshold(kind: str, threshold: float) -> list[Rule]:
    return [replace(r, threshold=threshold) if r.kind == kind else r for r in RULES]


@pytest.mark.parametrize(
    ("kind", "plant"),
    [
        ("INPUT_BOUND", lambda e: e.waits(100, 100, 100, 100).steps(50, 50, 50, 50)),
        ("COMPUTE_BOUND", lambda e: e.steps(*[100] * 6)),
        ("CALLBACK_OVERHEAD", lambda e: e.span(hook_series("train", "Printer"), 80)),
    ],
)
def test_a_rules_judge_uses_the_threshold_the_rule_declares(
    epoch: Callable[[str], Epoch], kind: str, plant: Callable[[Epoch], Epoch]
) -> None:
    c = case(plant(epoch("train")).window())
    share = fires(kind, c).share
    assert rule(kind).find(c)
    assert replace(rule(kind), threshold=share + 0.01).find(c) == []
    found, _ = judge(c, with_threshold(kind, share + 0.01))
    assert kind not in [v.kind for v in found]


def step_shares(found: list[Verdict]) -> list[tuple[str, float]]:
    return [(v.kind, round(v.share, 2)) for v in found if v.part == "step"]


def test_how_general_a_claim_is_comes_from_its_rule(epoch: Callable[[str], Epoch]) -> None:
    """60% of steps and a 20% section: the section is served first and the step keeps the rest;
    COMPUTE_BOUND declared as specific as a section, the larger claim is served first and takes
    all of the step."""
    c = case(epoch("train").section("forward", 200).steps(*[100] * 6).window())
    assert step_shares(judge(c)[0]) == [("COMPUTE_BOUND", 0.4), ("SLOW_SECTION", 0.2)]
    rules = [replace(r, generality=0) if r.kind == "COMPUTE_BOUND" else r for r in RULES]
    assert step_shares(judge(c, rules)[0]) == [("COMPUTE_BOUND", 0.6)]


def test_advice_is_given_on_the_share_the_partition_left(epoch: Callable[[str], Epoch]) -> None:
    """A rule's proposal runs after the partition: it sees the share its verdict kept, and its gain
    is held within it."""
    seen: list[float] = []

    def propose(c: Case, v: Verdict) -> Proposal:
        seen.append(v.share)
        return Proposal({"torch_threads": 1}, (0.5, 0.9), "fewer threads")

    rules = [replace(r, propose=propose) if r.kind == "COMPUTE_BOUND" else r for r in RULES]
    c = case(epoch("train").section("forward", 200).steps(*[100] * 6).window())
    (step,) = [v for v in judge(c, rules)[0] if v.kind == "COMPUTE_BOUND"]
    assert seen == [pytest.approx(0.4)]  # the step's 60% less the section's 20%
    assert (step.action, step.change) == ("fewer threads", {"torch_threads": 1})
    assert step.gain == (pytest.approx(0.4), pytest.approx(0.4))
