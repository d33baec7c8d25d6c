"""What the worker advice reads about a stage epoch's loaders: the workers' side, the loop's pace,
the epoch's start, and the facts the gain model argues from.

Everything here is read from what the run recorded (``perfkit.loaders`` records the settings
and the CPU split), by the names ``perfkit.names`` gives the series and gauges. ``LoaderFacts``
is what the gain model reads, in seconds per batch; its properties say what the facts say
directly (a batch made by computing, the workers the free memory holds).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..._snapshot import Snapshot
from ...names import (
    MEMORY_AVAILABLE,
    TORCH_THREADS,
    USABLE_CORES,
    fetch_cpu_gauge,
    fetch_queued_series,
    fetch_series,
    iter_series,
    loop_cpu_gauge,
    setting_gauge,
    step_series,
    wait_cpu_gauge,
    wait_series,
    worker_uss_gauge,
)
from ...stages import Account, worker_count
from .._case import Case, SectionTime

MEMORY_SPARE = 0.5
"""The share of the host's least free memory that added workers may not take: a worker's own memory
grows as it touches the parent's pages (copy-on-write), and the model, the page cache and the
other processes need room too."""
COMPUTES = 0.5
"""A batch whose CPU time is at least this fraction of its wall time is made by computing: its
workers need cores of their own."""
WAITING_CORE = 0.1
"""The least share of a core a waiting worker is counted to take (waking, pickling its batch,
the loop unpickling it), however little CPU its batches measured: it bounds how many waiting
workers the cores allow."""
UNSTABLE = 1.5
"""A loop whose mean time per batch is past this multiple of its median time is unstable: a busy
machine stretched some steps (measured on a loaded VM: median 187 ms, mean 497 ms), and a gain
predicted from either time did not hold (1 worker proposed for 35%-41% saved -37% and +37%)."""


@dataclass(frozen=True)
class Workers:
    """What the DataLoader workers of a loader did in a window."""

    count: int
    batches: int
    batch_s: float  # mean time a worker spent on one batch
    top_section: SectionTime | None  # the worker-side section with the most self time


def workers(snap: Snapshot, loader: str) -> Workers | None:
    """The workers' side of ``loader`` (None when the loader ran no instrumented worker)."""
    fetch = snap.get(fetch_series(loader))
    count = worker_count(snap, fetch_series(loader)) if fetch is not None else 0
    if fetch is None or not count:
        return None
    tree = snap.tree
    prefix = (fetch_series(loader),)
    inside = {p: t for p, t in tree.items() if p[:1] == prefix and len(p) > 1}
    kids: dict[tuple[str, ...], int] = {}
    for path, totals in inside.items():
        if len(path) > 2:
            kids[path[:-1]] = kids.get(path[:-1], 0) + totals.total_ns
    sections = [
        SectionTime(p, max(0, t.total_ns - kids.get(p, 0)) / 1e9, t.total_ns / 1e9, t.count)
        for p, t in inside.items()
    ]
    top = max(sections, key=lambda s: s.self_s, default=None)
    return Workers(count, fetch.count, fetch.mean_s, top)


def loop_s_per_batch(case: Case) -> float | None:
    """How often the loop asks for a batch when it need not wait: all but the wait, per step."""
    steps = case.steps / max(1, len(case.window.ranks))
    if not steps:
        return None
    a = case.window.account
    return max(0.0, a.wall_s - a.seconds("data_wait")) / steps


def loaders(case: Case) -> list[tuple[str, Account]]:
    """The stage's loaders, each with its own account (for a stage with one: the stage's)."""
    a = case.window.account
    return list(a.loaders.items()) or [(case.window.loader_name, a)]


def boundary(case: Case) -> tuple[float, float]:
    """What starting the epoch cost beyond the loader's normal production: ``iter()`` on the loader
    (worker start-up), and how much longer the first batch waited than making a batch takes.

    The first batch of an epoch always waits for one batch to be made (nothing is prefetched
    yet): with workers, a worker's time per batch; without, the same as any other batch. That
    much is the loader's ordinary production, INPUT_BOUND's; only what exceeds it (a slow
    ``worker_init_fn``, a dataset opened in each worker, a cold cache) is a cost of starting
    over. With several loaders in the stage, each loader's first batch counts against its own.
    """
    started = extra = 0.0
    for name, a in loaders(case):
        s, e = loader_boundary(case.window.snapshot, name, a)
        started, extra = started + s, extra + e
    return started, extra


def loader_boundary(snap: Snapshot, loader: str, a: Account) -> tuple[float, float]:
    """``boundary`` for one loader, from its account ``a``."""
    subjects = a.subjects.get("data_wait", {})
    started = subjects.get("iter", 0.0)
    wait = snap.get(wait_series(loader))
    begun = snap.get(iter_series(loader))  # how many times the loader was started in the epoch
    starts = max(1, begun.count if begun is not None else 1)
    others = (wait.count - starts) if wait is not None else 0
    typical = subjects.get("batches", 0.0) / others if others > 0 else 0.0
    extra = a.first_batch_extra_s or 0.0
    w = workers(snap, loader)
    if w is None:  # made in this process: the first batch costs what any batch does
        return started, extra
    # the first waits (extra over the typical wait, plus the typical wait) against one batch's making
    return started, max(0.0, extra + typical * starts - w.batch_s * starts)


@dataclass(frozen=True)
class LoaderFacts:
    """What the gain model reads about one loader in one stage epoch (seconds per batch)."""

    loader: str
    steps: int
    wall_s: float
    wait_s: float  # the steady wait per batch (the epoch's start left out)
    loop_s: float  # the loop's body per batch (everything but the wait), the mean
    batch_s: float  # making one batch: a worker's time per batch, or the wait itself without workers
    batch_cpu_s: float | None  # CPU seconds making one batch (None: not measured)
    loop_cpu_s: float | None  # the process's CPU seconds in the loop's body per batch
    workers: int
    cores: int  # the cores the process may use
    torch_threads: int | None = None
    persistent: bool | None = None
    worker_mb: float | None = None  # one worker's own memory (USS), the largest seen (None: not read)
    free_mb: float | None = None  # the host's least free memory in the epoch (None: not sampled)
    loop_median_s: float | None = None  # the loop's body per batch at the step's median (None: no steps)
    loop_steady_s: float | None = None  # the mean with the epoch's one slowest step left out
    starts: int = 1  # the times the loader was started (iter()) in the epoch
    queued_s: float | None = None  # a worker's batch's time ready to run but waiting for a core

    @property
    def typical_loop_s(self) -> float:
        """The loop's body per batch at the median step: what the count is chosen by and the high
        end assumes (a mean stretched by a few slow steps asks too few workers)."""
        return self.loop_s if self.loop_median_s is None else self.loop_median_s

    @property
    def unstable(self) -> bool:
        """The loop's mean time per batch is past ``UNSTABLE`` times its median: no gain holds. The
        epoch's one slowest step is left out of that mean: a first step that compiles or tunes
        (seconds, once) is not a loop whose time moves."""
        steady = self.loop_s if self.loop_steady_s is None else self.loop_steady_s
        return self.loop_median_s is not None and steady > UNSTABLE * self.loop_median_s

    @property
    def model_cores(self) -> float:
        """Cores the loop's body keeps busy (its CPU seconds per wall second); 1 when not measured."""
        if self.loop_cpu_s is None or self.loop_s <= 0:
            return 1.0
        return self.loop_cpu_s / self.loop_s

    @property
    def computes(self) -> bool:
        """A batch made by computing (CPU-bound): CPU at least ``COMPUTES`` of the time it was not
        waiting for a core (on crowded cores a computing worker's CPU over wall read 35-49%, and it
        was taken for one waiting on a disk); unmeasured counts as computing (the safe side)."""
        if self.batch_cpu_s is None:
            return True
        return self.batch_cpu_s >= COMPUTES * (self.batch_s - (self.queued_s or 0.0))

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
    begun = snap.get(iter_series(loader))
    n = int(workers) if workers is not None else (1 if fetch is not None else 0)
    queued = None
    if n and fetch is not None:
        batch_s, batch_cpu = fetch.mean_s, _gauge(g, fetch_cpu_gauge(loader))
        waited = snap.get(fetch_queued_series(loader))
        queued = None if waited is None or not waited.count else waited.total_s / fetch.count
    else:
        batch_s = wait.mean_s if wait is not None else waiting_s / steps
        batch_cpu = _gauge(g, wait_cpu_gauge(loader))
    cores = _gauge(g, USABLE_CORES)
    threads = _gauge(g, TORCH_THREADS)
    persistent = _gauge(g, setting_gauge(loader, "persistent_workers"))
    free = g.get(MEMORY_AVAILABLE)
    median, steady = _loop_times(case, loop_s)
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
        loop_median_s=median,
        loop_steady_s=steady,
        starts=max(1, begun.count if begun is not None else 1),
        queued_s=queued,
    )


def _loop_times(case: Case, loop_s: float) -> tuple[float | None, float | None]:
    """The loop's body per batch (mean ``loop_s``) read two more ways from the epoch's steps, each
    plus what the body spends outside the step (callbacks, logging) at its mean: with the step at
    its median (None without steps), and with the epoch's slowest step left out (None under 3)."""
    step = case.window.snapshot.get(step_series(case.stage))
    if step is None or not step.count:
        return None, None
    outside = loop_s - step.mean_s
    median = None if math.isnan(step.median_s) else max(0.0, outside) + step.median_s
    if step.count < 3:
        return median, None
    return median, max(0.0, outside + (step.total_s - step.max_s) / (step.count - 1))


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
