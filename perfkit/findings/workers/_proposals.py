"""What each loader verdict proposes: a change with its gain, or its one reason for none, in words.

One account of what workers would do, that every output repeats (the summary, the console
block, the page): INPUT_BOUND's (``loader_advice``), EPOCH_BOUNDARY's (``restart_advice``) and
CONTENTION's (``core_advice``). Each is a rule's ``propose`` step, run on the verdicts left once
a stage epoch's seconds are partitioned; its ``said`` is the verdict's action.

The worker count comes from a loader trial where one ran for the loader (``perfkit.trial``,
recorded in the run directory), else from the gain model (``_model``). The model guesses a
worker's rate as ``batch / k``: right for a batch that sleeps on a disk, wrong where workers
share a disk, a lock or a cache, or start slowly. The trial measured the rate at each worker
count instead; the proposal is then the fewest workers whose measured rate keeps up with the
rate the loop consumed batches, and the gain comes from that rate. What the trial could not
see stays in the bounds: it ran without the model, so computing workers still get no more
cores than the model's threads leave free (``max_workers``) and the low end keeps the cores'
bound and the contention margin (``_model.period``).

    >>> from ._facts import LoaderFacts
    >>> f = LoaderFacts("train", steps=100, wall_s=2.0, wait_s=0.015, loop_s=0.005, batch_s=0.015,
    ...                 batch_cpu_s=0.0, loop_cpu_s=0.005, workers=0, cores=2)
    >>> p = propose_workers(f, share=0.75)
    >>> p.change["num_workers"], [round(g, 2) for g in p.gain]
    (3, [0.69, 0.74])
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

from ..._units import format_seconds, plural
from ...loaders import TrialResult, workers_needed
from ...names import display_name, setting_gauge
from ...stages import Account
from .._case import Case
from ._facts import LoaderFacts, facts, loop_s_per_batch, workers
from ._model import NOISE, NOT_SETTINGS, Proposal, Relief, gain, max_workers, memory_binds, relief_gain
from ._words import (
    cpu_words,
    gain_words,
    loop_words,
    memory_words,
    no_core,
    no_memory,
    none_faster,
    not_worth,
    rate_words,
    unstable,
)

IN_PROCESS = (
    "the batches are made in this process (no DataLoader workers, or the loader is not "
    "instrumented): give the DataLoader num_workers > 0"
)
"""INPUT_BOUND's action for a loader without worker records, where no count can be proposed."""


def loader_advice(case: Case, loader: str, a: Account, waiting_s: float, share: float) -> Proposal:
    """INPUT_BOUND's action for ``loader`` of the stage (its account ``a``), whose steady wait is
    ``waiting_s``, ``share`` of the epoch: workers for a loader without, naming the section that
    made its batches in the wait; else what its workers would do. Another loader of the stage than
    its own keeps the plain words (the run recorded the settings and CPU split of the stage's own)."""
    w = workers(case.window.snapshot, loader)
    if w is not None:
        top = w.top_section
        work = "per-batch work" if top is None else f"per-batch work ({display_name(top.name)})"
        return running_workers(case, loader, waiting_s, share, w.count, w.batch_s, work=work)
    if loader == case.window.loader_name:
        advice = worker_advice(case, waiting_s, share, IN_PROCESS)
    else:
        advice = Proposal(said=IN_PROCESS)
    inside = a.subjects.get("wait_sections", {})
    if not inside:
        return advice
    name, _ = max(inside.items(), key=lambda kv: kv[1])
    return replace(advice, said=f"{advice.said}; or make {display_name(name)} cheaper")


def worker_advice(case: Case, waiting_s: float, share: float, otherwise: str) -> Proposal:
    """The worker count for the stage's loader with its gain, why none is proposed, or
    ``otherwise`` where the loader's numbers were not recorded."""
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
    case: Case, loader: str, waiting_s: float, share: float, count: int, batch_s: float, *, work: str
) -> Proposal:
    """What ``count`` workers making a batch in ``batch_s`` each would do. Workers that keep up by
    count and have the cores (and memory) to run send the search elsewhere; otherwise the gain
    model's proposal, or its one reason for none (cores, memory, noise), then to make ``work``
    cheaper. Never a count that keeps up beside a sentence saying the cores are the limit."""
    loop_s = loop_s_per_batch(case)
    needed = workers_needed(batch_s, loop_s) if loop_s else None
    if needed is None:
        return Proposal(said="make each batch cheaper to produce")
    f = facts(case, waiting_s) if loader == case.window.loader_name else None
    cap = max_workers(f) if f is not None else case.cores
    pace = f"{format_seconds(batch_s)} a batch against {format_seconds(loop_s or 0)} of loop time"
    keep = "keeps" if count == 1 else "keep"
    if needed <= count and needed <= cap:
        return Proposal(
            said=f"{plural(count, 'worker')} {keep} up ({needed} needed at {pace}): {_where(case, loader)}"
        )
    if f is None:  # a run recorded without the CPU split: the cores left beside the loop are all we know
        if needed > case.cores:
            return Proposal(
                said=f"only {plural(case.cores, 'core')} {'is' if case.cores == 1 else 'are'} free for "
                f"workers ({pace}): the cores, not the worker "
                f"count, are the limit; make the {work} cheaper"
            )
        return Proposal(said=f"raise num_workers from {count} to {needed} ({pace})")
    p = worker_advice(case, waiting_s, share, "")
    return p if p.change else Proposal(said=f"{p.said}; make the {work} cheaper")


WAIT_WORDS = {
    "worker": "waiting for a worker's batch: the workers keep up on average but not at every batch (one "
    "slower worker, or batches that come in bursts: a larger prefetch_factor)",
    "receive": "rebuilding the workers' batches in this process (fewer, larger tensors, a smaller dtype)",
    "sampler": "the sampler, in this process (precompute or vectorize its indices)",
    "pin": "pinning the batches in the loop's thread",
    "make": "making batches in this process",
    "other": "outside what was timed in it",
}
"""Where the main process spent a wait (``Account.subjects["wait_parts"]``), as INPUT_BOUND says it."""


def _where(case: Case, loader: str) -> str:
    """Where the waits of workers that keep up went, as measured; unmeasured where it was not."""
    where = case.window.account.subjects.get("wait_parts", {}) if loader == case.window.loader_name else {}
    total = sum(where.values())
    if total <= 0:
        return "the wait is not the workers' making, and where it went was not timed here"
    part, seconds = max(where.items(), key=lambda kv: kv[1])
    return f"of the wait, {seconds / total:.0%} is {WAIT_WORDS.get(part, part)}"


def propose_workers(f: LoaderFacts, share: float) -> Proposal:
    """The smallest worker count that keeps up with the loop (as many as the cores and the memory
    allow), its gain, or why none is proposed."""
    cap = max_workers(f)
    loop = f.typical_loop_s
    keeps_up = math.ceil(f.batch_s / loop - 1e-9) if loop > 0 else cap
    k = min(max(keeps_up, f.workers + 1), cap)
    if k <= f.workers:
        return Proposal(said=no_memory(f) if memory_binds(f, f.workers + 1) else no_core(f))
    if f.unstable:
        return Proposal(said=unstable(f, f"{plural(k, 'worker')} would keep up"))
    starts = not f.persistent
    low, high = gain(f, k, share, starts=False)
    if low < NOISE:
        return Proposal(said=not_worth(f, k))
    change: dict[str, Any] = {"loader": f.loader, "num_workers": k}
    if starts:  # a pool started once; every epoch would otherwise pay its start
        change["persistent_workers"] = True
    one = k == 1
    if k >= keeps_up:
        bound = f"keep{'s' if one else ''} up with the loop"
    elif memory_binds(f, keeps_up):
        bound = f"{'is' if one else 'are'} all that the free memory holds ({memory_words(f)})"
        change["reason"] = f"memory: {memory_words(f)}"
    else:
        bound = f"{'is' if one else 'are'} all that {f.cores} cores allow"
    said = (
        f"{k} worker{'' if one else 's'} {bound} ({format_seconds(f.batch_s)} a batch against "
        f"{loop_words(f)}{cpu_words(f)})"
    )
    return Proposal(change, (low, high), said)


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
        return Proposal(said=none_faster(f, now))
    need = 1 / f.typical_loop_s if f.typical_loop_s > 0 else math.inf
    keeping = [k for k in options if rates[k] >= need]
    k = keeping[0] if keeping else max(options, key=rates.__getitem__)
    if f.unstable:
        return Proposal(said=unstable(f, f"{plural(k, 'worker')} measured alone at {rates[k]:.0f} batches/s"))
    low, high = gain(f, k, share, starts=False, measured_s=1 / rates[k])
    if low < NOISE:
        return Proposal(
            said=f"no change to the workers is proposed: a trial of the loader alone measured {rates[k]:.0f} "
            f"batches/s at {plural(k, 'worker')}, which would save about as much as it costs on "
            f"{plural(f.cores, 'core')}"
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
        f"{rate_words(need)} the loop consumes, one batch every {loop_words(f)}; the model's own "
        "CPU use bounds the low end)"
    )
    return Proposal(change, (low, high), said)


def restart_advice(case: Case, started_s: float, first_s: float) -> Proposal:
    """EPOCH_BOUNDARY's action, for an epoch's start that took ``started_s`` in ``iter()`` and
    ``first_s`` more for its first batch than making a batch takes: keep the workers where they
    start again every epoch (with the gain), else what else the start can be made of."""
    w = workers(case.window.snapshot, case.window.loader_name)
    keep = persistent_advice(case, started_s, first_s) if w is not None else None
    if keep is not None and not keep.change:  # kept already: each epoch's first batch is made anew
        action = (
            "the workers are kept between epochs already (persistent_workers=True), but each epoch's "
            "first batch is made while the loop waits (the others while it computes): make the "
            "per-batch work cheaper"
        )
    elif started_s >= first_s:
        action = (
            "keep the workers between epochs (persistent_workers=True): they are started again each epoch"
        )
    elif w is not None:  # the workers' first batch waited past their normal time per batch
        action = (
            "each worker spends that before its first batch (a slow worker_init_fn, the dataset opened in "
            "every worker): make it cheaper, or keep the workers between epochs (persistent_workers=True) "
            "so it runs once"
        )
    elif set_to := _set_workers(case):  # workers by the loader's settings, their batches not timed
        action = (
            f"the first batch of each pass takes that much longer than the others: the "
            f"{plural(set_to, 'worker')} start their first batches together, so the first "
            "waits for one worker's whole batch (time the workers with perfkit.torch.instrument to "
            "tell that from a slow start)"
        )
    else:
        action = (
            "the first batch of each pass takes that much longer than the others (files opened or a cache "
            "filled at every pass; with DataLoader workers not timed here, their pool filling: the first "
            "batch waits for one worker's whole batch): do it once, before the first epoch"
        )
    if keep is None or not keep.change:
        return Proposal(said=action)
    return Proposal(keep.change, keep.gain, f"{action}; {keep.said}")


def _set_workers(case: Case) -> int:
    """The workers the stage's loader was set to (0 where its settings were not recorded)."""
    n = case.window.snapshot.gauges.get(setting_gauge(case.window.loader_name, "num_workers"))
    return 0 if n is None else int(n.last)


def persistent_advice(case: Case, started_s: float, first_s: float) -> Proposal:
    """Keep workers that start again every epoch. It saves the start (``iter()``) and the first
    batch's extra wait; the low end keeps a fifth of it (the pool's reset at each epoch, and what
    the extra wait was not the workers' start). No change where the run recorded that its workers
    are kept already: the change is made."""
    kept = case.window.snapshot.gauges.get(setting_gauge(case.window.loader_name, "persistent_workers"))
    if case.wall_s <= 0 or (kept is not None and kept.last):
        return Proposal()
    high = (started_s + first_s) / case.wall_s
    low = 0.8 * started_s / case.wall_s + 0.5 * first_s / case.wall_s
    weight = case.stage_wall_s / case.run_wall_s if case.run_wall_s > 0 else 1.0
    said = gain_words((low, high), weight)
    return Proposal({"loader": case.window.loader_name, "persistent_workers": True}, (low, high), said)


def core_advice(
    case: Case, f: LoaderFacts, threads: int, r: Relief, step_mean_s: float, share: float
) -> Proposal:
    """CONTENTION's action: give the workers their cores by ``r`` (``threads``: torch's threads
    now), with its gain; ``share``: the steps' time past their median, of the epoch."""
    change: dict[str, Any]
    if r.threads is not None:
        change = {"torch_threads": r.threads}
        how = f"call torch.set_num_threads({r.threads}) before training (it is {threads})"
    else:
        change = {"loader": f.loader, "num_workers": r.producers}
        how = f"lower num_workers from {f.workers} to {r.producers} on the {f.loader} DataLoader"
    saved = relief_gain(f, r, step_mean_s, share)
    weight = case.stage_wall_s / case.run_wall_s if case.run_wall_s > 0 else 1.0
    return Proposal(change, saved, f"give the workers their cores: {how}; {gain_words(saved, weight)}")
