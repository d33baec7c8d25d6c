"""What a loader trial measured (``perfkit.trial``): one row per setting, and the one it picks.

The trial itself needs torch and lives in ``perfkit.torch``; its result is plain data, here,
so that the run directory can keep it and the findings can read it without torch. A row is
a DataLoader setting and what iterating the loader alone at that setting gave: batches per
second after a warm-up, what each epoch pays before its first batch, the memory each worker
holds as its own (USS: a forked worker's RSS counts the pages it shares with the parent), and
the CPU cores the setting kept busy (the main process and its workers together).

The pick is the smallest setting that keeps up with the rate the training loop consumed
batches (fewest workers, then the cheapest start); where none does, the fastest. Without a
rate to meet, the smallest within ``NEAR`` of the fastest: rows closer than that are noise.

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
