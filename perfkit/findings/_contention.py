"""CONTENTION: DataLoader workers and the model's threads want more cores than the machine has.

torch runs a step on ``torch.get_num_threads()`` threads (one per core by default), and each
computing worker wants a core too. Past the cores, the model's threads wait for a core at every
parallel region: the median step stays what the model costs, the mean grows with the moments
a worker held a core (on 2 cores, 2 threads and 2 workers of a 6 ms collate: a median step of
3 ms, a mean of 17 ms). Called COMPUTE_BOUND, this would send the user to speed up a model that
is not slow. The verdict claims the step's time beyond its median, and proposes giving the
workers their cores: fewer torch threads (``torch_threads``), or, with one thread already,
fewer workers.

The gain's high end is that excess; the low end assumes the model loses its parallelism
entirely (a step on ``t`` of ``T`` threads takes ``T / t`` times its median) and that the workers
still have to keep up (``batch / workers``).
"""

from __future__ import annotations

import math

from .._rule import Outcome
from .._units import format_seconds
from ..names import stage_label, step_series
from ._case import Case
from ._gain import CONTENTION_MARGIN, IPC_S, facts, gain_words

CONTENTION_MIN = 0.10
SPREAD = 1.3
"""The mean step past this many medians, with the cores oversubscribed, is contention: a model's
steps on one batch size and shape are alike."""


def contention(case: Case) -> Outcome:
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
    if share < CONTENTION_MIN:
        return None
    keep = max(1, f.cores - math.ceil(workers_cores))
    if threads > keep:
        change: dict[str, object] = {"torch_threads": keep}
        how = f"call torch.set_num_threads({keep}) before training (it is {threads})"
        step_after = step.median_s * threads / keep
        producers = f.workers
    else:
        fewer = max(1, math.floor(f.cores - threads))
        if fewer >= f.workers:
            return None
        change = {"loader": f.loader, "num_workers": fewer}
        how = f"lower num_workers from {f.workers} to {fewer} on the {f.loader} DataLoader"
        step_after, producers = step.median_s, fewer
    outside = max(0.0, f.loop_s - step.mean_s)  # the loop's body beyond the step
    p0 = f.loop_s + f.wait_s
    low_period = max(step_after + outside, (f.batch_s + 2 * IPC_S) / producers) * (1 + CONTENTION_MARGIN)
    low = max(0.0, f.steps * (p0 - low_period) / f.wall_s)
    high = share
    weight = case.stage_wall_s / case.run_wall_s if case.run_wall_s > 0 else 1.0
    message = (
        f"the {stage_label(case.stage)} step waits for cores: {threads} torch thread(s) and {f.workers} "
        f"DataLoader worker(s) making batches by computing ({workers_cores:.1f} cores) want more than "
        f"the {f.cores} cores; a step takes {format_seconds(step.median_s)} at the median but "
        f"{format_seconds(step.mean_s)} on average"
    )
    action = f"give the workers their cores: {how}; {gain_words((min(low, high), high), weight)}"
    evidence = {
        "step_median_s": step.median_s,
        "step_mean_s": step.mean_s,
        "torch_threads": float(threads),
        "worker_cores": workers_cores,
        "cores": float(f.cores),
    }
    return case.verdict(share, message, action, evidence=evidence, change=change, gain=(min(low, high), high))
