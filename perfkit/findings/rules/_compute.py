"""The rules that read the step: COMPUTE_BOUND (the step as a whole) and SLOW_SECTION (a named block).

Both claim the step's seconds; the section names one block of the user's, so the partition serves
it before COMPUTE_BOUND, which keeps the rest, and after the rules that name why a step is slow
(the optimizer step, a sync stall, a copy, launch overhead: ``_parts``, ``_device``), whose cause
may sit inside the user's block. Under DDP a share is the mean rank's: each rank's seconds against
its own epoch (``rank_sections``, ``Case.rank_wall_s``).
"""

from __future__ import annotations

from ..._device_facts import gpu_busy
from ..._rule import Outcome
from ..._units import format_seconds
from ...names import COLLECTIVE_WAIT, display_name, part_label, stage_label, step_series
from .._case import Case, rank_sections
from ._device import mfu_line
from ._rule import Rule

ONE_SECTION = 0.5
"""A section holding this much of the step is what the step costs: the model as a whole is then
no finding (SLOW_SECTION names the section)."""


def compute_bound(case: Case, minimum: float) -> Outcome:
    if step_series(case.stage) not in case.window.snapshot:
        return case.abstain(f"{display_name(step_series(case.stage))} (no step was timed)")
    account = case.window.account
    # Under DDP and FSDP the step holds each rank's waits in collectives (the gradient all-reduce,
    # the all-gathers, the reduce-scatters): where they were timed, they are not compute
    # (STRAGGLER's or COMMUNICATION_BOUND's to claim)
    compute = account.compute_s()
    if compute is None:
        share = case.fraction("step")
    else:
        share = compute / account.wall_s if account.wall_s > 0 else 0.0
    if share < minimum:
        return None
    top = next(iter(rank_sections(case)), None)
    if top is not None and top.self_s >= ONE_SECTION * account.seconds("step"):
        return None
    message = f"the step's own compute is {share:.0%} of the {stage_label(case.stage)} epoch"
    if compute is not None and compute < account.seconds("step"):
        wait = (account.seconds("step") - compute) / account.wall_s
        held = "collectives" if account.overlays.get(COLLECTIVE_WAIT) else "the gradient all-reduce"
        message += f" (its {wait:.0%} waiting for the other ranks in {held} left out)"
    parts = account.subjects.get("step", {})
    if parts and account.wall_s > 0:  # where its time went, one level below
        named = sorted(parts.items(), key=lambda kv: -kv[1])
        message += ": " + ", ".join(f"{part_label(p)} {s / account.wall_s:.0%}" for p, s in named if s > 0)
        action = (
            "the loop is compute-bound in the model's forward and backward: mixed precision, a larger batch, "
            "torch.compile"
        )
    else:
        action = (
            "the loop is compute-bound: speed up the model (mixed precision, a larger batch, torch.compile) "
            "or time its parts with perfkit.section to see which one"
        )
    context = mfu_line(case)
    busy = gpu_busy(case.window.snapshot)
    if busy is not None and context is not None and not context.startswith("MFU unknown"):
        message += f"; the GPU is busy {busy:.0%} at {context}"  # "the kernels, not the loop"
        if busy >= 0.8:
            action = "the loop keeps the GPU busy: the kernels are the limit (mixed precision, fused kernels)"
    elif context is not None and not context.startswith("MFU unknown"):
        message += f"; {context}"
    return case.verdict(share, message, action, evidence={"step_fraction": share})


def slow_section(case: Case, minimum: float) -> Outcome:
    sections = rank_sections(case)  # the mean rank's: each rank's time against its own epoch
    wall = case.rank_wall_s
    if not sections:
        return None
    top = sections[0]
    share = top.self_s / wall if wall > 0 else 0.0
    if share < minimum:
        return None
    where = " > ".join(top.path)
    over = f"the {stage_label(case.stage)} epoch"
    calls = f"{top.count} calls"
    if case.rank_count > 1:
        over += f" on the mean of {case.rank_count} ranks"
        calls += " each"
    own = f"{format_seconds(top.self_s)} of its own time over {calls}"
    message = f"section {display_name(where)} takes {share:.0%} of {over} ({own})"
    action = f"make {display_name(top.name)} cheaper: it is the largest part of the loop you timed"
    evidence = {"self_s": top.self_s, "calls": float(top.count)}
    if case.rank_count > 1:
        evidence |= {"ranks": float(case.rank_count), "rank_wall_s": wall}
    return case.verdict(share, message, action, subject=where, evidence=evidence)


RULES = (
    Rule("COMPUTE_BOUND", ("step",), 0.50,
         "when the step's own compute is most of the epoch, nothing else can win more", compute_bound,
         claims="step", generality=2),
    Rule("SLOW_SECTION", ("sections",), 0.10,
         "a single timed block worth a tenth of the epoch is the first place to look", slow_section,
         claims="step", generality=1),
)  # fmt: skip
