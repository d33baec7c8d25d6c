"""What a loader trial measured (``perfkit.trial``): one row per setting, and the one it picks.

The trial itself needs torch and lives in ``perfkit.torch``; its result is plain data, here,
so that the run directory can keep it and the findings can read it without torch. A row is
a DataLoader setting and what iterating the loader alone at that setting gave: batches per
second after a warm-up, what each epoch pays before its first batch, the memory each worker
holds as its own (USS: a forked worker's RSS counts the pages it shares with the parent), the
CPU cores the setting kept busy (the main process and its workers together), and the cores
they were ready to use but waited for (another process held them: Linux's run-queue delay).

The pick is the smallest setting that keeps up with the rate the training loop consumed
batches (fewest workers, then the cheapest start); where none does, the fastest. Without a
rate to meet, the smallest within ``NEAR`` of the fastest: rows closer than that are noise.

Worker counts past the cores (``next_count``): a worker that computes needs a core of its own,
but one that waits (a disk, a network, a sleep) does not, so the cores are no ceiling for it:
four waiting workers on two cores make batches twice as fast as two. The trial's own first
round (0 up to the cores) therefore goes on, doubling the top count, while the rate still rises
clearly, the need is not met and the workers measurably wait (``WAITS``), up to
``MOST_PER_CORE`` workers a core. The rule reads only the rows, so the text can
say why the trial went as far as it did, from the result alone.

    >>> rows = (TrialSetting(0, None, False, False, 20, 40.0, 0.02),
    ...         TrialSetting(2, 2, False, False, 20, 150.0, 0.30))
    >>> pick(rows, need=100.0).num_workers, pick(rows, need=30.0).num_workers
    (2, 0)
    >>> result = TrialResult("train", rows, rows[1], 100.0, 30.0, 4.2, 2, 2)
    >>> TrialResult.from_dict(result.to_dict()) == result
    True
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

NEAR = 0.10
"""Rows within this fraction of the fastest count as fast as it (run-to-run noise of a short trial)."""
WAITS = 0.5
"""Workers that want fewer cores than this fraction of their count spend most of their time
waiting, not computing (the line the worker advice draws for a batch): more of them overlap more
waits, where workers that compute would only share the cores. What they want is the cores they
kept busy (the main process's CPU counted with theirs) and, where the system says, the cores they
were ready to use but waited for: on a machine other work keeps busy, workers that compute get
little CPU, yet they wait for a core, not for data. At the counts the trial doubles (at most twice
the cores) it also leaves cores free. CPU that could not be read counts as computing: the trial
then stays within the cores."""
MOST_PER_CORE = 4
"""The most workers a core the trial tries, and the most ``workers`` may name: a bound on the
processes (each with its memory and its start) a trial forks, not a measured best."""


@dataclass(frozen=True)
class TrialSetting:
    """One DataLoader setting the trial ran, and what it measured."""

    num_workers: int
    prefetch_factor: int | None
    persistent_workers: bool
    pin_memory: bool
    batches: int  # batches timed after the warm-up
    batches_per_s: float
    start_s: float  # iter() to the first batch: what each epoch pays before it gets a batch
    worker_uss_mb: float | None = None  # the mean worker's own memory (None: no workers, or not readable)
    cpu_cores: float | None = None  # CPU seconds of the process and its workers per wall second
    ready_cores: float | None = None  # seconds ready to run but waiting for a core, per wall second

    @property
    def label(self) -> str:
        """The setting in words: ``2 workers, persistent, prefetch 4``."""
        words = [f"{self.num_workers} worker{'' if self.num_workers == 1 else 's'}"]
        if self.persistent_workers:
            words.append("persistent")
        if self.num_workers and self.prefetch_factor not in (None, 2):
            words.append(f"prefetch {self.prefetch_factor}")
        if self.pin_memory:
            words.append("pinned")
        return ", ".join(words)

    def change(self) -> dict[str, Any]:
        """The DataLoader arguments that make this setting (a verdict's ``change`` without its loader)."""
        out: dict[str, Any] = {"num_workers": self.num_workers}
        if self.num_workers:
            out["persistent_workers"] = self.persistent_workers
            if self.prefetch_factor is not None:
                out["prefetch_factor"] = self.prefetch_factor
        out["pin_memory"] = self.pin_memory
        return out

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TrialSetting:
        uss, cores, prefetch = data.get("worker_uss_mb"), data.get("cpu_cores"), data.get("prefetch_factor")
        ready = data.get("ready_cores")
        return cls(
            num_workers=int(data["num_workers"]),
            prefetch_factor=None if prefetch is None else int(prefetch),
            persistent_workers=bool(data["persistent_workers"]),
            pin_memory=bool(data["pin_memory"]),
            batches=int(data["batches"]),
            batches_per_s=float(data["batches_per_s"]),
            start_s=float(data["start_s"]),
            worker_uss_mb=None if uss is None else float(uss),
            cpu_cores=None if cores is None else float(cores),
            ready_cores=None if ready is None else float(ready),
        )


@dataclass(frozen=True)
class TrialResult:
    """A loader trial: every setting it ran, the one it picks, and the conditions it ran under."""

    loader: str  # the loader's name (its stage: train, val)
    settings: tuple[TrialSetting, ...]
    best: TrialSetting | None  # None: no setting finished within the budget
    need_batches_per_s: float | None  # the rate to keep up with (None: not given)
    budget_s: float
    elapsed_s: float
    cores: int  # the cores the process may use
    torch_threads: int  # the main process's intra-op threads during the trial
    skipped: tuple[str, ...] = ()  # settings not run (the budget ran out) or that failed, in words
    own_counts: bool = False  # the worker counts were the trial's (not given): it may go past the cores

    @property
    def keeps_up(self) -> bool | None:
        """Whether the picked setting meets the rate asked for (None: no rate was given)."""
        if self.need_batches_per_s is None or self.best is None:
            return None
        return self.best.batches_per_s >= self.need_batches_per_s

    def rates(self) -> dict[int, TrialSetting]:
        """The fastest row at each worker count."""
        out: dict[int, TrialSetting] = {}
        for s in self.settings:
            if s.num_workers not in out or s.batches_per_s > out[s.num_workers].batches_per_s:
                out[s.num_workers] = s
        return out

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["best"] = None if self.best is None else self.settings.index(self.best)
        data["settings"] = [s.to_dict() for s in self.settings]
        data["skipped"] = list(self.skipped)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TrialResult:
        """Read ``to_dict``'s output back (``ValueError``/``KeyError``/``TypeError`` on a broken one)."""
        settings = tuple(TrialSetting.from_dict(s) for s in data["settings"])
        best = data.get("best")
        if best is not None and not 0 <= int(best) < len(settings):
            raise ValueError(f"best must index one of the {len(settings)} settings, got {best!r}")
        need = data.get("need_batches_per_s")
        return cls(
            loader=str(data["loader"]),
            settings=settings,
            best=None if best is None else settings[int(best)],
            need_batches_per_s=None if need is None else float(need),
            budget_s=float(data["budget_s"]),
            elapsed_s=float(data["elapsed_s"]),
            cores=int(data["cores"]),
            torch_threads=int(data["torch_threads"]),
            skipped=tuple(str(s) for s in data.get("skipped", ())),
            own_counts=bool(data.get("own_counts", False)),
        )


def pick(settings: Sequence[TrialSetting], need: float | None) -> TrialSetting | None:
    """The smallest setting that keeps up with ``need`` batches/s, else the fastest; without
    ``need``, the smallest within ``NEAR`` of the fastest (None when nothing ran)."""
    if not settings:
        return None
    fastest = max(settings, key=lambda s: s.batches_per_s)
    floor = need if need is not None else fastest.batches_per_s * (1 - NEAR)
    enough = [s for s in settings if s.batches_per_s >= floor]
    if not enough:
        return fastest
    return min(enough, key=lambda s: (s.num_workers, s.start_s))


@dataclass(frozen=True)
class Growth:
    """Whether a first round of worker counts goes on past its top count, and why, in words."""

    count: int | None  # the worker count to measure next; None: stop at the top
    why: str  # why it goes on or stops (empty where there is nothing to say: no workers measured)
    rising: bool  # the rate still rose clearly at the top, or nothing says it stopped (a stop: the cap)


def grow(rows: Sequence[TrialSetting], need: float | None, cores: int) -> Growth:
    """The next worker count after ``rows`` (a first round, one row per count): double the top
    count while its rate is more than ``NEAR`` above the count before it, no row meets ``need``,
    and the top's workers wait (want fewer than ``WAITS`` cores a worker: busy, or ready to run
    but waiting for one), up to ``MOST_PER_CORE`` workers a core. The count before is the one
    below with workers: one worker waits as the main process did, so 0 to 1 says nothing of
    whether 2 would be faster.

    >>> def row(k, rate, busy):
    ...     return TrialSetting(k, 2 if k else None, False, False, 20, rate, 0.1, None, busy)
    >>> waiting = [row(0, 2.9, 0.0), row(1, 2.8, 0.0), row(2, 5.8, 0.1)]
    >>> grown = grow(waiting, 11.0, cores=2)
    >>> grown.count, grown.rising, grown.why
    (4, True, 'the workers wait (0.1 cores busy at 2 workers) and the rate kept rising')
    >>> grow(waiting, 5.0, cores=2).why
    '2 workers keep up with the 5.0 batches/s needed'
    >>> grow([*waiting[:2], row(2, 5.6, 1.9)], 11.0, cores=2).why
    'the workers compute (1.9 cores busy at 2 workers)'
    >>> starved = TrialSetting(2, 2, False, False, 20, 5.6, 0.1, None, 0.6, ready_cores=1.3)
    >>> grow([*waiting[:2], starved], 11.0, cores=2).why  # other work held the cores
    'the workers want the cores (0.6 cores busy at 2 workers, and 1.3 more ready to run but waiting for one)'
    >>> grow([*waiting, row(4, 11.6, 0.1), row(8, 12.0, 0.2)], None, cores=2).why
    '8 workers were not clearly faster than 4 (12.0 against 11.6 batches/s)'
    >>> grow([*waiting, row(4, 11.6, 0.1), row(8, 23.0, 0.2)], None, cores=2).why
    '16 workers would pass the most the trial tries, 4 a core (8 on 2 cores)'
    >>> grow(waiting[:2], None, cores=1).count  # one core: nothing says 2 workers would not help
    2
    """
    ranked = sorted(rows, key=lambda r: r.num_workers)
    if not ranked or ranked[-1].num_workers == 0:
        return Growth(None, "", False)
    top = ranked[-1]
    met = [r for r in ranked if need is not None and r.batches_per_s >= need]
    if met:
        keeps = "keeps" if met[0].num_workers == 1 else "keep"
        return Growth(
            None, f"{_workers(met[0].num_workers)} {keeps} up with the {need:.1f} batches/s needed", False
        )
    busy = top.cpu_cores
    if busy is None:
        return Growth(None, "the workers' CPU use could not be read (taken as computing)", False)
    ready = top.ready_cores or 0.0
    where = f"{busy:.1f} cores busy at {_workers(top.num_workers)}"
    if busy + ready >= WAITS * top.num_workers:
        if ready < WAITS * busy:
            return Growth(None, f"the workers compute ({where})", False)
        wanted = f"{where}, and {ready:.1f} more ready to run but waiting for one"
        return Growth(None, f"the workers want the cores ({wanted})", False)
    before = [r for r in ranked[:-1] if r.num_workers > 0]
    if before and top.batches_per_s <= (1 + NEAR) * before[-1].batches_per_s:
        prev = before[-1]
        return Growth(
            None,
            f"{_workers(top.num_workers)} were not clearly faster than {prev.num_workers} "
            f"({top.batches_per_s:.1f} against {prev.batches_per_s:.1f} batches/s)",
            False,
        )
    nxt = 2 * top.num_workers
    if nxt > MOST_PER_CORE * cores:
        most = f"{MOST_PER_CORE} a core ({MOST_PER_CORE * cores} on {cores} core{'' if cores == 1 else 's'})"
        return Growth(None, f"{nxt} workers would pass the most the trial tries, {most}", True)
    return Growth(nxt, f"the workers wait ({where})" + (" and the rate kept rising" if before else ""), True)


def _workers(k: int) -> str:
    return f"{k} worker{'' if k == 1 else 's'}"


def next_count(rows: Sequence[TrialSetting], need: float | None, cores: int) -> int | None:
    """The worker count to measure after the first round's ``rows`` (None: stop): ``grow``'s."""
    return grow(rows, need, cores).count


def first_round(settings: Sequence[TrialSetting]) -> list[TrialSetting]:
    """A trial's first round, by worker count: the first row at each count (the second round's
    variants come after the row they vary)."""
    out: dict[int, TrialSetting] = {}
    for s in settings:
        out.setdefault(s.num_workers, s)
    return [out[k] for k in sorted(out)]
