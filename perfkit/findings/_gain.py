"""What a change to a loader is expected to gain, and the bounds that cap it.

A loop that waits for its loader turns once per batch in ``P0 = loop + wait`` seconds. With
``k`` workers it turns in ``P1 = max(loop, batch / k, cpu / cores)``: never faster than its
own body, than ``k`` workers can make batches, or than the machine's cores can run the CPU
seconds a batch costs (the model's and the batch's together: a worker that computes takes its
core from the model's threads; one that sleeps on a disk or a network does not). The gain is
``steps * (P0 - P1)`` over the epoch's wall time, and never more than the wait it removes.

The interval's high end is that bound; its low end adds what workers cost and the model does
not show: moving each batch between processes (``IPC_S``, both ends), a margin for the
contention the averages hide (``CONTENTION_MARGIN``), and one start of the workers per epoch
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

    >>> f = LoaderFacts("train", steps=100, wall_s=2.0, wait_s=0.015, loop_s=0.005, batch_s=0.015,
    ...                 batch_cpu_s=0.0, loop_cpu_s=0.005, workers=0, cores=2)
    >>> p = propose_workers(f, share=0.75)
    >>> p.change["num_workers"], [round(g, 2) for g in p.gain]
    (3, [0.7, 0.75])
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .._units import format_seconds
from ..names import (
    MEMORY_AVAILABLE,
    TORCH_THREADS,
    USABLE_CORES,
    fetch_cpu_gauge,
    fetch_series,
    loop_cpu_gauge,
    setting_gauge,
    wait_cpu_gauge,
    wait_series,
    worker_uss_gauge,
)
from ._case import Case, loop_s_per_batch

IPC_S = 0.0005
"""What moving one batch from a worker to the loop costs beyond making it (pickling into shared
memory, the queue, unpickling): 0.1-0.3 ms for a small batch measured here; doubled for the low end."""
CONTENTION_MARGIN = 0.10
"""The low end's slack on the new time per batch: averages hide the moments workers and the model
want a core at once."""
START_S = 0.15
"""Starting workers (a fork each, plus their first batch) charged once per epoch to the low end."""
NOISE = 0.02
"""A change whose low end saves less than this fraction of the epoch is not proposed: run-to-run
noise on a loaded machine is of that size."""
MEMORY_SPARE = 0.5
"""The share of the host's least free memory that added workers may not take: a worker's own memory
grows as it touches the parent's pages (copy-on-write), and the model, the page cache and the
other processes need room too."""
COMPUTES = 0.5
"""A batch whose CPU time is at least this fraction of its wall time is made by computing: its
workers need cores of their own."""


@dataclass(frozen=True)
class LoaderFacts:
    """What the gain model reads about one loader in one stage epoch (seconds per batch)."""

    loader: str
    steps: int
    wall_s: float
    wait_s: float  # the steady wait per batch (the epoch's start left out)
    loop_s: float  # the loop's body per batch (everything but the wait)
    batch_s: float  # making one batch: a worker's time per batch, or the wait itself without workers
    batch_cpu_s: float | None  # CPU seconds making one batch (None: not measured)
    loop_cpu_s: float | None  # the process's CPU seconds in the loop's body per batch
    workers: int
    cores: int  # the cores the process may use
    torch_threads: int | None = None
    persistent: bool | None = None
    worker_mb: float | None = None  # one worker's own memory (USS), the largest seen (None: not read)
    free_mb: float | None = None  # the host's least free memory in the epoch (None: not sampled)

    @property
    def model_cores(self) -> float:
        """Cores the loop's body keeps busy (its CPU seconds per wall second); 1 when not measured."""
        if self.loop_cpu_s is None or self.loop_s <= 0:
            return 1.0
        return self.loop_cpu_s / self.loop_s

    @property
    def computes(self) -> bool:
        """A batch made by computing (CPU-bound); unmeasured counts as computing (the safe side)."""
        return self.batch_cpu_s is None or self.batch_cpu_s >= COMPUTES * self.batch_s

    @property
    def free_cores(self) -> float:
        """Cores the model's threads leave free for workers."""
        return max(0.0, self.cores - self.model_cores)

    @property
    def memory_workers(self) -> int | None:
        """The most workers the free memory holds (those running, whose memory is already taken,
        and as many more as fit in what ``MEMORY_SPARE`` leaves); None when either is unknown."""
        if self.worker_mb is None or self.free_mb is None or self.worker_mb <= 0:
            return None
        return self.workers + math.floor(self.free_mb * (1 - MEMORY_SPARE) / self.worker_mb + 1e-9)


NOT_SETTINGS = ("loader", "reason")
"""The keys of a change that say which loader and why, not what to set."""


@dataclass(frozen=True)
class Proposal:
    """A change to make and its expected gain (low, high) as fractions of the stage epoch; or, with
    an empty change, why none is proposed."""

    change: Mapping[str, Any] = field(default_factory=dict)
    gain: tuple[float, float] | None = None
    said: str = ""


def facts(case: Case, waiting_s: float) -> LoaderFacts | None:
    """The facts of the stage's loader, ``waiting_s`` being its steady wait in the epoch."""
    snap, loader = case.window.snapshot, case.window.loader_name
    steps = case.steps // max(1, len(case.window.ranks))
    loop_s = loop_s_per_batch(case)
    g = snap.gauges
    if not steps or loop_s is None or loop_cpu_gauge(loader) not in g:
        return None  # a run recorded without the CPU split: no number is better than a guess
    workers = _gauge(g, setting_gauge(loader, "num_workers"))
    fetch = snap.get(fetch_series(loader))
    wait = snap.get(wait_series(loader))
    n = int(workers) if workers is not None else (1 if fetch is not None else 0)
    if n and fetch is not None:
        batch_s, batch_cpu = fetch.mean_s, _gauge(g, fetch_cpu_gauge(loader))
    else:
        batch_s = wait.mean_s if wait is not None else waiting_s / steps
        batch_cpu = _gauge(g, wait_cpu_gauge(loader))
    cores = _gauge(g, USABLE_CORES)
    threads = _gauge(g, TORCH_THREADS)
    persistent = _gauge(g, setting_gauge(loader, "persistent_workers"))
    free = g.get(MEMORY_AVAILABLE)
    return LoaderFacts(
        loader=loader,
        steps=steps,
        wall_s=case.wall_s,
        wait_s=waiting_s / steps,
        loop_s=loop_s,
        batch_s=batch_s,
        batch_cpu_s=batch_cpu,
        loop_cpu_s=_gauge(g, loop_cpu_gauge(loader)),
        workers=n,
        cores=int(cores) if cores is not None else case.cores + 1,
        torch_threads=int(threads) if threads is not None else None,
        persistent=None if persistent is None else bool(persistent),
        worker_mb=_worker_mb(case),
        free_mb=None if free is None else float(free.min),
    )


def _worker_mb(case: Case) -> float | None:
    """One worker's own memory: the largest any worker of the epoch held (the sampler's USS), else
    the largest a loader trial's workers held; None where neither was read."""
    g, n = case.window.snapshot.gauges, 0
    seen = []
    while worker_uss_gauge(n) in g:
        seen.append(float(g[worker_uss_gauge(n)].max))
        n += 1
    if not seen:
        trial = [
            s.worker_uss_mb for t in case.trials if t.loader == case.window.loader_name for s in t.settings
        ]
        seen = [mb for mb in trial if mb is not None]
    return max(seen, default=None)


def _gauge(gauges: Mapping[str, Any], name: str) -> float | None:
    g = gauges.get(name)
    return None if g is None else float(g.mean)


def period(f: LoaderFacts, k: int, *, pessimistic: bool, measured_s: float | None = None) -> float:
    """The loop's time per batch with ``k`` workers (``k`` > 0); ``measured_s``: the time per batch
    a loader trial measured at ``k`` workers, in place of the modelled ``batch / k`` (the trial
    ran alone: the cores' bound, shared with the model, still applies)."""
    ipc = 2 * IPC_S if pessimistic else 0.0
    cpu = (f.loop_cpu_s if f.loop_cpu_s is not None else f.loop_s) + (
        f.batch_cpu_s if f.batch_cpu_s is not None else f.batch_s
    )
    making = (f.batch_s + ipc) / k if measured_s is None else measured_s  # a trial's rate includes the IPC
    p = max(f.loop_s + ipc / 2, making, (cpu + ipc) / f.cores)
    return p * (1 + CONTENTION_MARGIN) if pessimistic else p


def gain(
    f: LoaderFacts, k: int, share: float, *, starts: bool, measured_s: float | None = None
) -> tuple[float, float]:
    """The fraction of the epoch saved by ``k`` workers: (low, high), high at most ``share``;
    ``starts``: the workers start again every epoch (charged to the low end); ``measured_s``: see
    ``period``."""
    p0 = f.loop_s + f.wait_s
    high = min(share, f.steps * (p0 - period(f, k, pessimistic=False, measured_s=measured_s)) / f.wall_s)
    low = f.steps * (p0 - period(f, k, pessimistic=True, measured_s=measured_s)) / f.wall_s
    if starts:
        low -= START_S / f.wall_s
    return (max(0.0, min(low, high)), max(0.0, high))


def core_workers(f: LoaderFacts) -> int:
    """The most workers the cores allow: computing ones need a free core each; waiting ones (disk,
    network, sleep) need little CPU, up to twice the cores."""
    if f.computes:
        return math.floor(f.free_cores + 1e-9)
    return 2 * f.cores


def max_workers(f: LoaderFacts) -> int:
    """The most workers the cores and the free memory allow."""
    memory = f.memory_workers
    return core_workers(f) if memory is None else min(core_workers(f), memory)


def memory_binds(f: LoaderFacts, wanted: int) -> bool:
    """Whether the free memory, more than the cores, keeps the count under ``wanted``."""
    memory = f.memory_workers
    return memory is not None and memory < wanted and memory < core_workers(f)


def propose_workers(f: LoaderFacts, share: float) -> Proposal:
    """The smallest worker count that keeps up with the loop (as many as the cores and the memory
    allow), its gain, or why none is proposed."""
    cap = max_workers(f)
    keeps_up = math.ceil(f.batch_s / f.loop_s - 1e-9) if f.loop_s > 0 else cap
    k = min(max(keeps_up, f.workers + 1), cap)
    if k <= f.workers:
        return Proposal(said=_no_memory(f) if memory_binds(f, f.workers + 1) else _no_core(f))
    starts = not f.persistent
    low, high = gain(f, k, share, starts=False)
    if low < NOISE:
        return Proposal(said=_not_worth(f, k))
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
        f"{format_seconds(f.loop_s)} of loop time{_cpu_words(f)})"
    )
    return Proposal(change, (low, high), said)


def memory_words(f: LoaderFacts) -> str:
    """The memory bound in words: ``700 MB a worker (USS) against 2,000 MB free at the least, half
    of it kept spare``."""
    return (
        f"{f.worker_mb or 0:,.0f} MB a worker (USS) against {f.free_mb or 0:,.0f} MB free at the least, "
        f"{MEMORY_SPARE:.0%} of it kept spare"
    )


def _cpu_words(f: LoaderFacts) -> str:
    if f.batch_cpu_s is None:
        return ""
    kind = "computing" if f.computes else "waiting (disk, network, sleep), not computing"
    return f"; a batch is {f.batch_cpu_s / f.batch_s:.0%} CPU: {kind}" if f.batch_s > 0 else ""


def _no_core(f: LoaderFacts) -> str:
    return (
        f"no change to the workers is proposed: the model's threads keep {f.model_cores:.1f} of "
        f"{f.cores} cores busy and a batch is made by computing{_cpu_words(f)}, so more workers would "
        "take their cores from the model: the cores, not the worker count, are the limit"
    )


def _no_memory(f: LoaderFacts) -> str:
    return (
        f"no change to the workers is proposed: another worker would not fit in memory ({memory_words(f)}): "
        "memory, not the worker count, is the limit"
    )


def _not_worth(f: LoaderFacts, k: int) -> str:
    return (
        f"no change to the workers is proposed: the loader costs {format_seconds(f.batch_s)} a batch; "
        f"{k} workers would cost about as much as they save on {f.cores} cores"
    )


def gain_words(gain: tuple[float, float] | None, weight: float) -> str:
    """The expected gain in words: ``expected gain 30-45% of the epoch (12-18% of the run)``."""
    if gain is None:
        return ""
    low, high = gain
    return f"expected gain {_span(low, high)} of the epoch ({_span(low * weight, high * weight)} of the run)"


def _span(low: float, high: float) -> str:
    return f"{low:.0%}" if round(low * 100) == round(high * 100) else f"{low:.0%}-{high:.0%}"


def persistent_advice(case: Case, started_s: float, first_s: float) -> Proposal:
    """EPOCH_BOUNDARY's change where workers start again every epoch: keep them. It saves the start
    (``iter()``) and the first batch's extra wait; the low end keeps a fifth of it (the pool's
    reset at each epoch, and what the extra wait was not the workers' start). None where the run
    recorded that its workers are kept already: the change is made."""
    kept = case.window.snapshot.gauges.get(setting_gauge(case.window.loader_name, "persistent_workers"))
    if case.wall_s <= 0 or (kept is not None and kept.last):
        return Proposal()
    high = (started_s + first_s) / case.wall_s
    low = 0.8 * started_s / case.wall_s + 0.5 * first_s / case.wall_s
    weight = case.stage_wall_s / case.run_wall_s if case.run_wall_s > 0 else 1.0
    said = gain_words((low, high), weight)
    return Proposal({"loader": case.window.loader_name, "persistent_workers": True}, (low, high), said)
