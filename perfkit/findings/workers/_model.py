"""What a change to a loader (or to torch's threads) is expected to gain, and the bounds that cap it.

A loop that waits for its loader turns once per batch in ``P0 = loop + wait`` seconds. With
``k`` workers it turns in ``P1 = max(loop, batch / k, cpu / cores)``: never faster than its
own body, than ``k`` workers can make batches, or than the machine's cores can run the CPU
seconds a batch costs (the model's and the batch's together: a worker that computes takes its
core from the model's threads; one that sleeps on a disk or a network does not). The gain is
``steps * (P0 - P1)`` over the epoch's wall time, less what the first batch of each start of the
loader still waits (one worker makes it, however many make the others: ``batch + loop - P1``),
and never more than the wait it removes.

The loop's time is read two ways: at its median step (``LoaderFacts.typical_loop_s``: the count
is chosen by it and the high end assumes it) and at its mean (the low end). A busy machine
stretches a few steps, and a mean stretched so asks too few workers; where the mean is past
``UNSTABLE`` times the median, no gain is stated at all (``_proposals``).

The interval's high end is that bound; its low end adds what workers cost and the model does
not show: moving each batch between processes (``IPC_S``, both ends), a margin for the
contention the averages hide (``CONTENTION_MARGIN``, and more for the workers past the cores:
``preempted``), and one start of the workers per epoch
(``START_S``). Where the model's threads already use every core and a batch is made by
computing, no worker count is proposed: the workers would steal the model's cores (on 2 cores,
2 workers for a cheap loader made an epoch 2.4x slower). Where the low end is under
``NOISE``, nothing is proposed either: the verdict says the change would not beat the noise.

Memory bounds the count too: a new worker holds about as much of its own memory (USS: a forked
worker's RSS counts the pages it shares with the parent) as the largest one running, or as a
trial's workers held; the least memory the host had free in the epoch
(``system.memory_available_mb``) must hold the added workers with ``MEMORY_SPARE`` of it left
over. The sampler reads USS once a second, not every sample (``memory_full_info`` walks the
process's whole page map: 475 µs a worker measured here on a small forked worker, against 9 µs
for RSS), so a proposal rests on the epoch's largest USS per worker. Where memory binds, the proposal says so
and its change carries the ``reason``.

    >>> from ._facts import LoaderFacts
    >>> f = LoaderFacts("train", steps=100, wall_s=2.0, wait_s=0.015, loop_s=0.005, batch_s=0.015,
    ...                 batch_cpu_s=0.0, loop_cpu_s=0.005, workers=0, cores=2)
    >>> [round(g, 2) for g in gain(f, 3, share=0.75, starts=False)]
    [0.69, 0.74]
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ._facts import WAITING_CORE, LoaderFacts

IPC_S = 0.0005
"""What moving one batch from a worker to the loop costs beyond making it (pickling into shared
memory, the queue, unpickling): 0.1-0.3 ms for a small batch measured here; doubled for the low end."""
CONTENTION_MARGIN = 0.10
"""The low end's slack on the new time per batch: averages hide the moments workers and the model
want a core at once."""


def preempted(f: LoaderFacts, k: int) -> float:
    """More of that slack with ``k`` workers past the cores: each one past them shares a core with
    the loop's thread and takes it for its share of CPU (a batch's CPU over its wall; a tenth where
    unmeasured), at the moments it wakes, which the cores' average bound does not see. Measured on
    2 cores: 8 workers at 10% CPU (each sleeping 0.3 ms an item) stretched a 2.5 ms loop to 4.2 ms
    (+70% against the +60% this gives; a trial's 8-worker proposal had predicted 79%-84% and saved
    71%: ``tests/torch/test_trial_followed.py``); 8 workers at 2% CPU (sleeping 20 ms an item) left
    an 11 ms loop as it was (+12% here)."""
    share = f.batch_cpu_s / f.batch_s if f.batch_cpu_s is not None and f.batch_s > 0 else WAITING_CORE
    return max(0, k - f.cores) * share


START_S = 0.15
"""Starting workers (a fork each, plus their first batch) charged once per epoch to the low end."""
NOISE = 0.02
"""A change whose low end saves less than this fraction of the epoch is not proposed: run-to-run
noise on a loaded machine is of that size."""

NOT_SETTINGS = ("loader", "reason")
"""The keys of a change that say which loader and why, not what to set."""


@dataclass(frozen=True)
class Proposal:
    """A change to make and its expected gain (low, high) as fractions of the stage epoch; or, with
    an empty change, why none is proposed. ``said`` is the verdict's action."""

    change: Mapping[str, Any] = field(default_factory=dict)
    gain: tuple[float, float] | None = None
    said: str = ""


def period(f: LoaderFacts, k: int, *, pessimistic: bool, measured_s: float | None = None) -> float:
    """The loop's time per batch with ``k`` workers (``k`` > 0); ``measured_s``: the time per batch
    a loader trial measured at ``k`` workers, in place of the modelled ``batch / k`` (the trial
    ran alone: the cores' bound, shared with the model, still applies)."""
    ipc = 2 * IPC_S if pessimistic else 0.0
    cpu = (f.loop_cpu_s if f.loop_cpu_s is not None else f.loop_s) + (
        f.batch_cpu_s if f.batch_cpu_s is not None else f.batch_s
    )
    making = (f.batch_s + ipc) / k if measured_s is None else measured_s  # a trial's rate includes the IPC
    loop = f.loop_s if pessimistic else f.typical_loop_s  # the mean's slow steps in the low end only
    p = max(loop + ipc / 2, making, (cpu + ipc) / f.cores)
    return p * (1 + CONTENTION_MARGIN + preempted(f, k)) if pessimistic else p


def gain(
    f: LoaderFacts, k: int, share: float, *, starts: bool, measured_s: float | None = None
) -> tuple[float, float]:
    """The fraction of the epoch saved by ``k`` workers: (low, high), high at most ``share``;
    ``starts``: the workers start again every epoch (charged to the low end); ``measured_s``: see
    ``period``."""
    p0 = f.loop_s + f.wait_s
    fast = period(f, k, pessimistic=False, measured_s=measured_s)
    # each start's first batch is one worker's whole batch, however many workers make the others
    first = f.starts * max(0.0, f.batch_s + f.typical_loop_s - fast)
    high = min(share, (f.steps * (p0 - fast) - first) / f.wall_s)
    low = (f.steps * (p0 - period(f, k, pessimistic=True, measured_s=measured_s)) - first) / f.wall_s
    if starts:
        low -= START_S / f.wall_s
    return (max(0.0, min(low, high)), max(0.0, high))


def core_workers(f: LoaderFacts) -> int:
    """The most workers the cores allow: computing ones need a free core each; waiting ones (disk,
    network, sleep) take the share of a core their batches measured (at least ``WAITING_CORE``),
    as many as the free cores hold, and never fewer than twice the cores (a waiting worker's few
    wake-ups fit between the model's; ``period``'s cores bound charges their CPU)."""
    if f.computes or f.batch_cpu_s is None:
        return math.floor(f.free_cores + 1e-9)
    per = max(f.batch_cpu_s / f.batch_s if f.batch_s > 0 else 0.0, WAITING_CORE)
    return max(2 * f.cores, math.floor(f.free_cores / per + 1e-9))


def max_workers(f: LoaderFacts) -> int:
    """The most workers the cores and the free memory allow."""
    memory = f.memory_workers
    return core_workers(f) if memory is None else min(core_workers(f), memory)


def memory_binds(f: LoaderFacts, wanted: int) -> bool:
    """Whether the free memory, more than the cores, keeps the count under ``wanted``."""
    memory = f.memory_workers
    return memory is not None and memory < wanted and memory < core_workers(f)


@dataclass(frozen=True)
class Relief:
    """CONTENTION's change: fewer torch threads (``threads`` set) or fewer workers, and what a step
    and the batches' makers are after it."""

    threads: int | None  # torch's threads to set; None: lower the workers to ``producers``
    step_after_s: float  # a step's time after the change (fewer threads: slower by their ratio)
    producers: int  # the workers making batches after the change


def relief(f: LoaderFacts, threads: int, workers_cores: float, step_median_s: float) -> Relief | None:
    """How to give the workers their cores: ``threads`` torch threads and workers computing on
    ``workers_cores`` cores want more than ``f.cores``. Fewer torch threads where the model has more
    than the workers leave; with as few already, fewer workers; None where neither is fewer."""
    keep = max(1, f.cores - math.ceil(workers_cores))
    if threads > keep:
        return Relief(keep, step_median_s * threads / keep, f.workers)
    fewer = max(1, math.floor(f.cores - threads))
    if fewer >= f.workers:
        return None
    return Relief(None, step_median_s, fewer)


def relief_gain(f: LoaderFacts, r: Relief, step_mean_s: float, share: float) -> tuple[float, float]:
    """The fraction of the epoch the relief saves: (low, high). The high end is the step's time past
    its median (``share``); the low end assumes the model loses its parallelism entirely (a step
    on ``t`` of ``T`` threads takes ``T / t`` times its median) and that the workers still have to
    keep up (``batch / workers``)."""
    outside = max(0.0, f.loop_s - step_mean_s)  # the loop's body beyond the step
    p0 = f.loop_s + f.wait_s
    low_period = max(r.step_after_s + outside, (f.batch_s + 2 * IPC_S) / r.producers) * (
        1 + CONTENTION_MARGIN
    )
    low = max(0.0, f.steps * (p0 - low_period) / f.wall_s)
    return (min(low, share), share)
