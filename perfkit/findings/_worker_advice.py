"""INPUT_BOUND's worker proposal: from a loader trial where one ran for the loader, else the model.

The gain model (``_gain``) guesses a worker's rate as ``batch / k``: right for a batch that
sleeps on a disk, wrong where workers share a disk, a lock or a cache, or start slowly. A
loader trial (``perfkit.trial``, recorded in the run directory) measured the rate at each
worker count instead; where one is there for the loader, the proposal is the fewest workers
whose measured rate keeps up with the rate the loop consumed batches, and the gain comes from
that rate. What the trial could not see stays in the bounds: it ran without the model, so
computing workers still get no more cores than the model's threads leave free (``max_workers``)
and the low end keeps the cores' bound and the contention margin (``_gain.period``).
"""

from __future__ import annotations

import math
from typing import Any

from .._units import format_seconds
from ..loaders import TrialResult
from ..stages import workers_needed
from ._case import Case, loop_s_per_batch
from ._gain import (
    NOISE,
    NOT_SETTINGS,
    LoaderFacts,
    Proposal,
    facts,
    gain,
    gain_words,
    max_workers,
    memory_binds,
    memory_words,
    propose_workers,
)


def worker_advice(case: Case, waiting_s: float, share: float, otherwise: str) -> Proposal:
    """INPUT_BOUND's action for the stage's loader: a worker count with its gain, why none is
    proposed, or ``otherwise`` where the loader's numbers were not recorded."""
    f = facts(case, waiting_s)
    if f is None:
        return Proposal(said=otherwise)
    trial = next((t for t in reversed(case.trials) if t.loader == f.loader and t.settings), None)
    p = propose_workers(f, share) if trial is None else propose_measured(f, trial, share)
    if not p.change:
        return p
    weight = case.stage_wall_s / case.run_wall_s if case.run_wall_s > 0 else 1.0
    settings = ", ".join(f"{k}={v}" for k, v in p.change.items() if k not in NOT_SETTINGS)
    said = f"set {settings} on the {f.loader} DataLoader: {p.said}; {gain_words(p.gain, weight)}"
    return Proposal(p.change, p.gain, said)


def running_workers(
    case: Case, loader: str, waiting_s: float, share: float, count: int, batch_s: float
) -> Proposal:
    """INPUT_BOUND's action for a loader whose batches ``count`` workers make in ``batch_s`` each:
    the one account of what workers would do, that every output repeats. Workers that keep up by
    count and have the cores (and memory) to run send the search elsewhere; otherwise the gain
    model's proposal, or its one reason for none (cores, memory, noise). Never a count that keeps
    up beside a sentence saying the cores are the limit."""
    loop_s = loop_s_per_batch(case)
    needed = workers_needed(batch_s, loop_s) if loop_s else None
    if needed is None:
        return Proposal(said="make each batch cheaper to produce")
    f = facts(case, waiting_s) if loader == case.window.loader_name else None
    cap = max_workers(f) if f is not None else case.cores
    pace = f"{format_seconds(batch_s)} a batch against {format_seconds(loop_s or 0)} of loop time"
    if needed <= count and needed <= cap:
        return Proposal(
            said=f"{count} workers keep up ({needed} needed at {pace}): the wait comes from elsewhere "
            "(moving batches between processes, pinning memory)"
        )
    if f is None:  # a run recorded without the CPU split: the cores left beside the loop are all we know
        if needed > case.cores:
            return Proposal(
                said=f"only {case.cores} core(s) are free for workers ({pace}): the cores, not the worker "
                "count, are the limit; make the per-batch work cheaper"
            )
        return Proposal(said=f"raise num_workers from {count} to {needed} ({pace})")
    p = worker_advice(case, waiting_s, share, "")
    return p if p.change else Proposal(said=f"{p.said}; make the per-batch work cheaper")


def propose_measured(f: LoaderFacts, trial: TrialResult, share: float) -> Proposal:
    """The fewest workers, above those set and within what the cores allow, whose measured rate
    keeps up with the loop (else the fastest measured); its gain from the measured rate.

    >>> from perfkit.loaders import TrialSetting
    >>> rates = ((0, 60.0), (1, 60.0), (2, 120.0))
    >>> rows = tuple(TrialSetting(k, 2, False, False, 20, r, 0.1) for k, r in rates)
    >>> f = LoaderFacts("train", steps=100, wall_s=2.0, wait_s=0.015, loop_s=0.005, batch_s=0.015,
    ...                 batch_cpu_s=0.0, loop_cpu_s=0.005, workers=0, cores=2)
    >>> p = propose_measured(f, TrialResult("train", rows, rows[2], None, 30.0, 3.0, 2, 2), share=0.75)
    >>> p.change["num_workers"], [round(g, 2) for g in p.gain]
    (2, [0.54, 0.58])
    """
    rates = {k: s.batches_per_s for k, s in trial.rates().items()}
    now = rates.get(f.workers)
    cap = max_workers(f)
    options = [k for k in sorted(rates) if f.workers < k <= cap and (now is None or rates[k] > now)]
    if not options:
        return Proposal(said=_none_faster(f, now))
    need = 1 / f.loop_s if f.loop_s > 0 else math.inf
    keeping = [k for k in options if rates[k] >= need]
    k = keeping[0] if keeping else max(options, key=rates.__getitem__)
    low, high = gain(f, k, share, starts=False, measured_s=1 / rates[k])
    if low < NOISE:
        return Proposal(
            said=f"no change to the workers is proposed: a trial of the loader alone measured {rates[k]:.0f} "
            f"batches/s at {k} workers, which would save about as much as it costs on {f.cores} cores"
        )
    change: dict[str, Any] = {"loader": f.loader, "num_workers": k}
    if not f.persistent:  # a pool started once; every epoch would otherwise pay its start
        change["persistent_workers"] = True
    bound = "keep up with the loop" if keeping else "are the fastest a trial of the loader found"
    if not keeping and memory_binds(f, max(rates) if rates else k):
        bound = f"are all that the free memory holds ({memory_words(f)})"
        change["reason"] = f"memory: {memory_words(f)}"
    said = (
        f"{k} worker{'s' if k > 1 else ''} {bound} (measured alone: {rates[k]:.0f} batches/s against the "
        f"{_rate(need)} the loop consumes, one batch every {format_seconds(f.loop_s)}; the model's own "
        "CPU use bounds the low end)"
    )
    return Proposal(change, (low, high), said)


def _rate(need: float) -> str:
    return "any rate" if math.isinf(need) else f"{need:.0f} batches/s"


def _none_faster(f: LoaderFacts, now: float | None) -> str:
    at = "" if now is None else f" ({now:.0f} batches/s at {f.workers})"
    within = (
        f"the free memory allows ({memory_words(f)})"
        if memory_binds(f, f.workers + 1)
        else f"the {f.cores} cores allow beside the model"
    )
    return (
        f"no change to the workers is proposed: a trial of the loader alone found no setting faster than "
        f"{f.workers} worker{'s' if f.workers != 1 else ''}{at} within the {max_workers(f)} {within}"
    )
