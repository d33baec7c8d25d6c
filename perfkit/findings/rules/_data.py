"""The rules that read the data wait and the loaders: INPUT_BOUND, EPOCH_BOUNDARY, LOADER_SETUP.

INPUT_BOUND judges each loader's steady wait (the epoch's start left out: that is no rate of
the loader's; under DDP the wait every rank has); EPOCH_BOUNDARY the start itself (``iter()``
and the first batch's wait beyond making one batch). Both claim the data wait, the start first
(it names one thing), and propose what the workers would do (``workers``): the judges find, the
proposals advise, after the partition.
"""

from __future__ import annotations

from ..._rule import Outcome, Verdict
from ..._units import format_seconds
from ...names import display_name, loader_label, stage_label, wait_series
from ...stages import Account, workers_needed
from .._case import Case
from ..workers import (
    Proposal,
    boundary,
    loader_advice,
    loader_boundary,
    loaders,
    loop_s_per_batch,
    restart_advice,
    workers,
)
from ._rule import Rule


def input_bound(case: Case, minimum: float) -> Outcome | list[Verdict]:
    a = case.window.account
    if not a.seconds("data_wait") and wait_series(case.window.loader_name) not in case.window.snapshot:
        return case.abstain(
            f"{display_name(wait_series(case.window.loader_name))} (the loader was not timed)"
        )
    if a.loaders:  # several loaders: each one's wait is its own verdict, its own claim on the part
        found = (_input_bound(case, name, sub, minimum) for name, sub in a.loaders.items())
        return [v for v in found if v is not None]
    return _input_bound(case, case.window.loader_name, a, minimum)


def _input_bound(case: Case, loader: str, a: Account, minimum: float) -> Verdict | None:
    """INPUT_BOUND for one loader of the stage, from its account ``a``."""
    waiting, share = _steady_wait(case, loader, a)
    if share < minimum:
        return None
    evidence = {"data_wait_fraction": share, "data_wait_s": waiting}
    subject = _subject(case, loader, a)
    several = bool(case.window.account.loaders)  # one of several: named by index and its dataset's class
    its = f"its loader {subject.split(' loader ', 1)[1]}" if several else "its data loader"
    message = f"{stage_label(case.stage)} waits for {its} {share:.0%} of the epoch"
    if len(case.window.ranks) > 1:
        message += " on every rank"
    w = workers(case.window.snapshot, loader)
    if w is None:
        inside = a.subjects.get("wait_sections", {})
        if inside:  # the user's sections that made the batches, in the wait itself
            name, seconds = max(inside.items(), key=lambda kv: kv[1])
            total = a.seconds("data_wait")
            message += (
                f"; of its {format_seconds(total)} of waiting, {format_seconds(seconds)} "
                f"({seconds / total:.0%}) was {display_name(name)}, run in this process"
            )
            evidence["wait_section_s"] = seconds
        return case.verdict(share, message, "", subject=subject, evidence=evidence)
    evidence |= {"worker_batch_s": w.batch_s, "workers": float(w.count), "worker_cores": float(case.cores)}
    message += f"; each batch takes {format_seconds(w.batch_s)} in a worker"
    stalled = a.subjects.get("stalled_on", {})
    if stalled:  # which worker-side stage the loop was waiting for, wait by wait
        stage_name, seconds = max(stalled.items(), key=lambda kv: kv[1])
        message += (
            f"; of its {format_seconds(a.seconds('data_wait'))} of waiting, {format_seconds(seconds)} was "
            f"{display_name(stage_name)} running in the workers"
        )
        evidence["stalled_on_top_s"] = seconds
    elif w.top_section is not None and w.top_section.self_s > 0:
        share_of_batch = w.top_section.self_s / (w.batch_s * w.batches) if w.batch_s > 0 else 0.0
        message += f", {share_of_batch:.0%} of it in {display_name(w.top_section.name)}"
        evidence["top_worker_section_fraction"] = share_of_batch
    loop_s = loop_s_per_batch(case)
    needed = workers_needed(w.batch_s, loop_s) if loop_s else None
    if needed is not None:
        evidence["workers_needed"] = float(needed)
    return case.verdict(share, message, "", subject=subject, evidence=evidence)


def _steady_wait(case: Case, loader: str, a: Account) -> tuple[float, float]:
    """The loader's wait past the epoch's start, in seconds and as a share of the epoch. Under DDP
    the wait every rank has, the least of the ranks' shares: one rank's excess is no rate of the
    loader's (the rank is slow)."""
    started, first_extra = loader_boundary(case.window.snapshot, loader, a)
    waiting = max(0.0, a.seconds("data_wait") - started - first_extra)
    share = waiting / case.wall_s if case.wall_s > 0 else 0.0
    if len(case.window.ranks) > 1:
        share = min(
            share, *(_rank_waiting(r.account.loaders.get(loader, r.account)) for r in case.window.ranks)
        )
        waiting = share * case.wall_s
    return waiting, share


def _rank_waiting(a: Account) -> float:
    """One rank's share of its epoch spent waiting for batches past the epoch's start."""
    start = a.subjects.get("data_wait", {}).get("iter", 0.0) + (a.first_batch_extra_s or 0.0)
    return max(0.0, a.seconds("data_wait") - start) / a.wall_s if a.wall_s > 0 else 0.0


def _subject(case: Case, loader: str, a: Account) -> str:
    """How a verdict names the loader: by name, or, one of several, by index and dataset class."""
    if case.window.account.loaders:
        return loader_label(loader, case.window.loader_name, a.dataset)
    return loader


def input_proposal(case: Case, v: Verdict) -> Proposal:
    """INPUT_BOUND's proposal for the loader ``v`` names (``workers.loader_advice``)."""
    loader, a = next((name, a) for name, a in loaders(case) if _subject(case, name, a) == v.subject)
    waiting, share = _steady_wait(case, loader, a)
    return loader_advice(case, loader, a, waiting, share)


def epoch_boundary(case: Case, minimum: float) -> Outcome:
    started, first = boundary(case)
    share = (started + first) / case.wall_s if case.wall_s > 0 else 0.0
    if share < minimum:
        return None
    message = (
        f"the start of each {stage_label(case.stage)} epoch costs {share:.0%}: {format_seconds(started)} to "
        f"start the loader (iter(), worker start-up) and {format_seconds(first)} more for the first batch "
        "than making a batch takes"
    )
    evidence = {"loader_iter_s": started, "first_batch_extra_s": first}
    return case.verdict(share, message, "", subject=case.window.loader_name, evidence=evidence)


def restart_proposal(case: Case, v: Verdict) -> Proposal:
    """EPOCH_BOUNDARY's proposal (``workers.restart_advice``)."""
    return restart_advice(case, *boundary(case))


def loader_setup(case: Case, minimum: float) -> Outcome:
    setups = case.window.account.subjects.get("loader_setup", {})  # empty: no loader was built this epoch
    share = sum(setups.values()) / case.wall_s if case.wall_s > 0 else 0.0
    if share < minimum:
        return None
    stage, seconds = max(setups.items(), key=lambda kv: kv[1])
    message = (
        f"building the {stage_label(stage)} loaders takes {share:.0%} of the epoch "
        f"({format_seconds(seconds)})"
    )
    action = (
        f"build the {stage} dataset once, outside the *_dataloader() hook, or stop reloading it each epoch"
    )
    return case.verdict(share, message, action, subject=stage, evidence={"loader_setup_s": seconds})


RULES = (
    Rule("INPUT_BOUND", ("data_wait", "worker_batch"), 0.10,
         "below a tenth of the epoch, more workers buy little and transfer noise dominates", input_bound,
         claims="data_wait", generality=1, propose=input_proposal),
    Rule("EPOCH_BOUNDARY", ("loader_iter", "first_batch"), 0.05,
         "a twentieth of every epoch spent starting over is worth a persistent worker pool", epoch_boundary,
         claims="data_wait", propose=restart_proposal),
    Rule("LOADER_SETUP", ("loader_setup",), 0.10,
         "building loaders is one-off work: a tenth of an epoch means it is rebuilt too often", loader_setup,
         claims="loader_setup"),
)  # fmt: skip
