"""CONTENTION: DataLoader workers and the model's threads want more cores than the machine has.

torch runs a step on ``torch.get_num_threads()`` threads (one per core by default), and each
computing worker wants a core too. Past the cores, the model's threads wait for a core at every
parallel region: the median step stays what the model costs, the mean grows with the moments
a worker held a core (on 2 cores, 2 threads and 2 workers of a 6 ms collate: a median step of
3 ms, a mean of 17 ms). Called COMPUTE_BOUND, this would send the user to speed up a model that
is not slow. The verdict claims the step's time beyond its median, and proposes giving the
workers their cores (``workers.core_advice``): fewer torch threads (``torch_threads``), or, with
one thread already, fewer workers; where neither is fewer, there is no verdict.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..._rule import Outcome, Verdict
from ..._units import format_seconds, plural
from ...names import stage_label, step_series
from .._case import Case
from ..workers import LoaderFacts, Proposal, Relief, core_advice, facts, relief
from ._rule import Rule

SPREAD = 1.3
"""The mean step past this many medians, with the cores oversubscribed, is contention: a model's
steps on one batch size and shape are alike."""


@dataclass(frozen=True)
class _Contended:
    """A stage epoch whose steps waited for cores, and the relief there is."""

    f: LoaderFacts
    threads: int  # torch's threads
    workers_cores: float  # the cores the workers kept busy computing
    median_s: float
    mean_s: float
    share: float  # the steps' time past their median, of the epoch
    relief: Relief


def _contended(case: Case) -> _Contended | None:
    step = case.window.snapshot.get(step_series(case.stage))
    f = facts(case, case.window.account.seconds("data_wait"))
    if step is None or f is None or not f.workers or f.batch_cpu_s is None:
        return None  # no workers, or a run recorded without the CPU split
    threads = f.torch_threads or f.cores
    workers_cores = min(float(f.workers), f.batch_cpu_s * f.steps / f.wall_s)
    if threads + workers_cores <= f.cores or step.mean_s <= SPREAD * step.median_s:
        return None
    lost = (step.mean_s - step.median_s) * step.count / max(1, len(case.window.ranks))
    share = lost / case.wall_s if case.wall_s > 0 else 0.0
    r = relief(f, threads, workers_cores, step.median_s)
    if r is None:
        return None
    return _Contended(f, threads, workers_cores, step.median_s, step.mean_s, share, r)


def contention(case: Case, minimum: float) -> Outcome:
    c = _contended(case)
    if c is None or c.share < minimum:
        return None
    message = (
        f"the {stage_label(case.stage)} step waits for cores: {plural(c.threads, 'torch thread')} and "
        f"{plural(c.f.workers, 'DataLoader worker')} making batches by computing "
        f"({c.workers_cores:.1f} cores) want more than "
        f"the {plural(c.f.cores, 'core')}; a step takes {format_seconds(c.median_s)} at the median but "
        f"{format_seconds(c.mean_s)} on average"
    )
    evidence = {
        "step_median_s": c.median_s,
        "step_mean_s": c.mean_s,
        "torch_threads": float(c.threads),
        "worker_cores": c.workers_cores,
        "cores": float(c.f.cores),
    }
    return case.verdict(c.share, message, "", evidence=evidence)


def cores_proposal(case: Case, v: Verdict) -> Proposal:
    """CONTENTION's proposal: the relief, with its gain (none on an epoch not contended)."""
    c = _contended(case)
    return Proposal() if c is None else core_advice(case, c.f, c.threads, c.relief, c.mean_s, c.share)


RULES = (
    Rule("CONTENTION", ("step", "train.loop.cpu_s", "train.data.fetch_cpu_s"), 0.10,
         "a tenth of the epoch in steps slowed past their median, with the cores oversubscribed",
         contention, claims="step", propose=cores_proposal),
)  # fmt: skip
