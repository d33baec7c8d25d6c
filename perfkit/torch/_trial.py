"""``trial``: iterate a DataLoader alone, at each candidate setting, and pick the one to use.

Advice from a model of the loader ("3 workers should keep up") can be wrong where the model
is: a batch that sleeps on a disk gains from workers, one that computes only until the cores
run out, and a worker that starts slowly costs every epoch. The trial measures instead: it
rebuilds the loader at each setting (``_trial_loaders``: the user's loader is never touched),
times its first batch (the workers' start), then, after the rest of the batches the workers
made together while starting (one per worker, the first among them), ``batches`` batches in
whole rounds of one per worker, over several epochs where the loader is shorter (each restart
counted, as training pays it). k workers hand their batches over in rounds of k: a timing that
began or ended within a round counted its ready batches without their wait, or the wait
without them (8 sleeping workers on 2 cores read 1.4-1.9 times their rate over 15 batches, one
batch per worker of warm-up past the first; 0.96-1.04 times it in whole rounds). Each setting
gets an equal part of what is left of ``budget_s`` (the settings still to come counted with the
most the first round may yet grow by); the trial starts no setting after the budget is spent,
so it ends within the budget, one setting's start (a slow ``worker_init_fn`` cannot be cut
short) and the round of batches its last deadline fell in.

The worker counts are 0 up to the usable cores unless given, and past the cores where the rows
show it pays: a worker that waits on a disk, a network or a sleep needs no core of its own, so
a loader whose two workers keep 0.1 cores busy is about twice as fast with four, while workers
that compute only share the cores past them. So the first round goes on, doubling its top
count, while ``perfkit.loaders.grow`` says more would help (the rate still rising clearly, the
need not met, the workers measurably waiting), up to four workers a core; the text says why it
went as far as it did, or why it stopped while the rate still rose (that cap, or the budget).

    result = perfkit.trial(loader, need_batches_per_s=120, budget_s=30)
    print(perfkit.reports.trial_text(result))       # every row, the pick, and what it did not see

It runs without the model: the rates are what the loader can make when nothing else wants
the cores. The text says so, and how the model's own threads change the picture.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import psutil
import torch
from torch.utils.data import DataLoader

from .._registry import Registry, use_registry
from .._validate import check_int, check_name, check_number
from ..loaders import MOST_PER_CORE, TrialResult, TrialSetting, grow, pick, usable_cores
from ._trial_loaders import Candidate, rebuild, variants, worker_counts

if TYPE_CHECKING:
    from ..run import RunWriter

log = logging.getLogger("perfkit.torch.trial")


def trial(
    loader: DataLoader[Any],
    *,
    name: str = "train",
    need_batches_per_s: float | None = None,
    budget_s: float = 30.0,
    batches: int = 30,
    workers: Sequence[int] | None = None,
    progress: Callable[[TrialSetting], None] | None = None,
    run: RunWriter | None = None,
) -> TrialResult:
    """Time ``loader`` alone at each candidate setting and pick the smallest that keeps up.

    ``workers``: the worker counts to try (default 0 up to the usable cores, then twice the top
    count, again and again, while its workers wait and its rate still rises: ``grow``); the round after
    tries persistent workers, ``prefetch_factor=4`` and pinned memory (with a CUDA device) at
    the first round's pick. ``need_batches_per_s``: the rate the training loop consumed batches
    (the pick is the smallest setting that meets it, else the fastest). ``progress`` is called
    with each row as it is measured (each is also logged on ``perfkit.torch.trial``). ``run``:
    the run directory to record the result in, where a verdict's gain will come from it.

    >>> from torch.utils.data import DataLoader
    >>> result = trial(DataLoader(list(range(64)), batch_size=8), workers=[0], budget_s=5)
    >>> result.best.num_workers, result.best.batches
    (0, 30)
    """
    spec = _Spec.checked(loader, name, need_batches_per_s, budget_s, batches, workers)
    started = time.perf_counter()
    rows: list[TrialSetting] = []
    skipped: list[str] = []
    with torch.random.fork_rng(devices=[]), use_registry(Registry(capacity=1024)):
        # the global RNG is restored (a sampler without a generator draws its seed from it), and
        # what the user's dataset records during the trial stays out of the run's registry
        first = worker_counts(loader, spec.workers)
        second = len(variants(loader, Candidate(1, 2, False, bool(loader.pin_memory))))  # at most
        past = _doublings(max(spec.workers), spec.cores) if spec.own_counts else 0
        _run_all(spec, first, started, rows, skipped, progress, after=past + second)
        if spec.own_counts:
            _past_cores(spec, started, rows, skipped, progress, after=second)
        chosen = pick(rows, need_batches_per_s)
        if chosen is not None:
            base = Candidate(chosen.num_workers, chosen.prefetch_factor, False, chosen.pin_memory)
            _run_all(spec, variants(loader, base), started, rows, skipped, progress, after=0)
    result = TrialResult(
        loader=name,
        settings=tuple(rows),
        best=pick(rows, need_batches_per_s),
        need_batches_per_s=spec.need,
        budget_s=spec.budget_s,
        elapsed_s=time.perf_counter() - started,
        cores=spec.cores,
        torch_threads=torch.get_num_threads(),
        skipped=tuple(skipped),
        own_counts=spec.own_counts,
    )
    if run is not None:
        run.add_trial(result)
    return result


@dataclass(frozen=True)
class _Spec:
    loader: DataLoader[Any]
    need: float | None
    budget_s: float
    batches: int
    workers: list[int] = field(default_factory=list)
    cores: int = 1
    own_counts: bool = False  # workers not given: the first round may go past the cores

    @classmethod
    def checked(
        cls,
        loader: object,
        name: object,
        need: object,
        budget_s: object,
        batches: object,
        workers: Sequence[int] | None,
    ) -> _Spec:
        if not isinstance(loader, DataLoader):
            raise TypeError(
                f"loader must be a torch.utils.data.DataLoader, got {loader!r} "
                f"of type {type(loader).__name__}"
            )
        check_name(name, "name")
        cores = usable_cores()
        counts = list(range(cores + 1)) if workers is None else workers
        return cls(
            loader,
            None if need is None else check_number(need, "need_batches_per_s"),
            check_number(budget_s, "budget_s"),
            check_int(batches, "batches", low=1),
            sorted({check_int(k, "workers", high=MOST_PER_CORE * cores) for k in counts}),
            cores,
            workers is None,
        )


def _doublings(top: int, cores: int) -> int:
    """How many times the first round may yet double ``top`` workers within the most a trial tries."""
    n = 0
    while top > 0 and 2 * top <= MOST_PER_CORE * cores:
        top, n = 2 * top, n + 1
    return n


def _past_cores(
    spec: _Spec,
    started: float,
    rows: list[TrialSetting],
    skipped: list[str],
    progress: Callable[[TrialSetting], None] | None,
    *,
    after: int,
) -> None:
    """The first round past its top count: twice the top, one count at a time, while ``rows``
    say more workers would help (``grow``); each count is tried once (one the budget or
    the loader refused ends it). ``after``: the second round's settings, which keep their part."""
    tried = set(spec.workers)
    while True:
        growth = grow(rows, spec.need, spec.cores)
        k = growth.count
        if k is None or k in tried:
            return
        tried.add(k)
        log.info("perfkit trial: %d workers next: %s", k, growth.why)
        candidates = worker_counts(spec.loader, [k])
        _run_all(spec, candidates, started, rows, skipped, progress, after=_doublings(k, spec.cores) + after)


def _run_all(
    spec: _Spec,
    candidates: list[Candidate],
    started: float,
    rows: list[TrialSetting],
    skipped: list[str],
    progress: Callable[[TrialSetting], None] | None,
    *,
    after: int,
) -> None:
    """Measure ``candidates`` in turn, each with an equal part of the budget left (``after``:
    the most settings still to come after these, which keep their part)."""
    for i, c in enumerate(candidates):
        left = spec.budget_s - (time.perf_counter() - started)
        if left <= 0:
            spent = f"not run, the {spec.budget_s:g} s budget was spent"
            skipped += [f"{_label(x)}: {spent}" for x in candidates[i:]]
            return
        share = left / (len(candidates) - i + after)
        try:
            with warnings.catch_warnings():
                if spec.own_counts and c.num_workers > spec.cores:  # torch's warning: the trial went there
                    warnings.filterwarnings("ignore", "This DataLoader will create", UserWarning)
                row = measure(rebuild(spec.loader, c), c, spec.batches, time.perf_counter() + share)
        except EmptyLoader:
            raise
        except Exception as exc:  # a setting the loader cannot run (a dataset spawn cannot pickle)
            skipped.append(f"{_label(c)}: failed: {type(exc).__name__}: {exc}"[:300])
            log.warning("perfkit trial: %s", skipped[-1])
            continue
        rows.append(row)
        log.info("perfkit trial: %s: %.1f batches/s, %.3f s to the first batch", *_said(row))
        if progress is not None:
            progress(row)


class EmptyLoader(ValueError):
    """The loader gave no batch at all: there is nothing to time."""


def measure(dl: DataLoader[Any], c: Candidate, batches: int, deadline: float) -> TrialSetting:
    """One row: ``dl``'s start (its first batch; with persistent workers, an epoch's restart),
    then batches per second over ``batches`` batches in whole rounds of one per worker, stopping
    at the end of the round ``deadline`` falls in. A loader shorter than that is read over several
    epochs, each restart in the time, as training pays it."""
    me = psutil.Process()
    before = {p.pid for p in me.children()}
    t0 = time.perf_counter()
    epochs = _Epochs(dl)
    start_s = time.perf_counter() - t0
    if c.persistent_workers:  # kept workers: an epoch after the first pays only their restart
        t1 = time.perf_counter()
        epochs.restart()
        start_s = time.perf_counter() - t1
    # k workers hand batches over in rounds of k (each makes one while the others do): the timing
    # starts where a round ends (the rest of the first, made together while starting) and counts
    # whole rounds, else a round's ready batches, or its wait without them, would be timed alone
    rounds = max(1, c.num_workers)
    epochs.take(rounds - 1, deadline)
    pool = [p for p in me.children() if p.pid not in before]
    ready0, cpu0, t2 = _ready(pool), _cpu(pool), time.perf_counter()
    timed = epochs.take(-(-batches // rounds) * rounds, deadline, at_least=1, rounds=rounds)
    wall = time.perf_counter() - t2
    cpu1, ready1 = _cpu([p for p in me.children() if p.pid not in before]), _ready(pool)
    uss = _uss(pool)
    del epochs, dl  # the workers stop here, before the next setting starts its own
    return TrialSetting(
        c.num_workers,
        c.prefetch_factor,
        c.persistent_workers,
        c.pin_memory,
        timed,
        timed / wall,
        start_s,
        uss,
        _cores(cpu0, cpu1, wall),
        None if ready0 is None or ready1 is None or wall <= 0 else max(0.0, ready1 - ready0) / wall,
    )


class _Epochs:
    """Batches of a loader across epochs: where one ends, the next starts (``iter()`` again)."""

    def __init__(self, dl: DataLoader[Any]) -> None:
        self.dl = dl
        self.restart()

    def restart(self) -> None:
        """A new epoch, up to its first batch."""
        self.it = iter(self.dl)
        try:
            next(self.it)
        except StopIteration:
            raise EmptyLoader("the loader gave no batch: there is nothing to time") from None

    def take(self, n: int, deadline: float, *, at_least: int = 0, rounds: int = 1) -> int:
        """Take up to ``n`` batches (at least ``at_least``) before ``deadline``, past it to the end of a
        round of ``rounds`` batches; how many were taken."""
        got = 0
        while got < n and (got < at_least or got % rounds or time.perf_counter() < deadline):
            try:
                next(self.it)
            except StopIteration:
                self.restart()  # its first batch is one of those taken
            got += 1
        return got


def _cpu(pool: list[psutil.Process]) -> tuple[float, dict[int, float]]:
    """CPU seconds of this process, and of each worker process that could be read."""
    out = {}
    for p in pool:
        with contextlib.suppress(psutil.Error):
            t = p.cpu_times()
            out[p.pid] = t.user + t.system
    return time.process_time(), out


def _cores(a: tuple[float, dict[int, float]], b: tuple[float, dict[int, float]], wall: float) -> float | None:
    """Cores kept busy between two ``_cpu`` readings; None where a worker ended between them (its
    last CPU seconds cannot be read) or nothing was timed."""
    if wall <= 0 or not set(a[1]) <= set(b[1]):
        return None
    return (b[0] - a[0] + sum(cpu - a[1].get(pid, 0.0) for pid, cpu in b[1].items())) / wall


def _ready(pool: list[psutil.Process]) -> float | None:
    """Seconds this process and ``pool`` were ready to run but waited for a core (every thread's
    run-queue delay, Linux's ``/proc/PID/task/TID/schedstat``); None where it cannot be read (not
    Linux, or a worker gone)."""
    total = 0
    for pid in [os.getpid(), *(p.pid for p in pool)]:
        try:
            tasks = os.listdir(f"/proc/{pid}/task")
        except OSError:
            return None
        for tid in tasks:
            try:
                with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                    total += int(f.read().split()[1])
            except (OSError, IndexError, ValueError):
                continue  # a thread that ended between the listing and the read
    return total / 1e9


def _uss(pool: list[psutil.Process]) -> float | None:
    """The mean worker's own memory in MB (USS); None without workers or where it cannot be read."""
    sizes = []
    for p in pool:
        with contextlib.suppress(psutil.Error, AttributeError):  # gone, or no USS on this system
            sizes.append(p.memory_full_info().uss / 2**20)
    return sum(sizes) / len(sizes) if sizes else None


def _label(c: Candidate) -> str:
    return TrialSetting(c.num_workers, c.prefetch_factor, c.persistent_workers, c.pin_memory, 0, 0, 0).label


def _said(row: TrialSetting) -> tuple[str, float, float]:
    return row.label, row.batches_per_s, row.start_s
