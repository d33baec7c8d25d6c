"""Statistics of one series over one window, and the data they are computed from.

``SeriesData`` is what a snapshot keeps of a series: exact count, total, error
count and second moment over the window, and the retained samples themselves,
so that snapshots from several processes can be merged with exact percentiles.
``Stats`` is the read-only summary users look at, in seconds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ._ring import I64, Bools
from ._validate import Fields

_NS = 1e9


@dataclass(frozen=True)
class Stats:
    """Summary of one series over a window. Times are in seconds.

    ``count``, ``total_s``, ``mean_s``, ``std_s`` and ``errors`` cover every record of the
    window; the percentiles (and ``min_s``/``max_s`` when records were dropped) come from
    the ``n_samples`` records the ring still held. ``dropped`` says how many it had lost.

    >>> import perfkit
    >>> reg = perfkit.Registry()
    >>> with perfkit.section("load", registry=reg):
    ...     pass
    >>> reg.snapshot()["load"].count
    1
    """

    count: int
    total_s: float
    mean_s: float
    median_s: float
    p95_s: float
    p99_s: float
    std_s: float
    min_s: float
    max_s: float
    errors: int
    n_samples: int

    @property
    def dropped(self) -> int:
        """Records of the window that the ring overwrote before the snapshot read them."""
        return self.count - self.n_samples


@dataclass(frozen=True, eq=False)
class SeriesData:
    """Everything a snapshot knows about one series in its window.

    ``m2`` is the sum of squared deviations from the mean (ns²) over all ``count`` records;
    the arrays hold the retained records, oldest first, ``threads`` indexing the snapshot's
    thread table.
    """

    count: int
    total_ns: int
    errors: int
    m2: float
    min_ns: int
    max_ns: int
    durations_ns: I64
    starts_ns: I64
    threads: I64
    sample_errors: Bools

    @property
    def dropped(self) -> int:
        return self.count - len(self.durations_ns)

    def stats(self) -> Stats:
        d = self.durations_ns
        if len(d):
            median, p95, p99 = (float(v) / _NS for v in np.percentile(d, [50.0, 95.0, 99.0]))
        else:  # every sample of this part was overwritten: only the exact totals are left
            median = p95 = p99 = math.nan
        count = self.count or math.nan  # a part with no record (a hand-made SeriesData): no mean
        return Stats(
            count=self.count,
            total_s=self.total_ns / _NS,
            mean_s=self.total_ns / count / _NS,
            median_s=median,
            p95_s=p95,
            p99_s=p99,
            std_s=math.sqrt(max(self.m2, 0.0) / count) / _NS,
            min_s=self.min_ns / _NS,
            max_s=self.max_ns / _NS,
            errors=self.errors,
            n_samples=len(d),
        )

    def subset(self, mask: Bools, count: int, total_ns: int, errors: int) -> SeriesData:
        """The records selected by ``mask`` (e.g. one worker's), with that part's exact totals."""
        d = self.durations_ns[mask]
        # Where some were dropped, the retained samples' spread is scaled to the exact count.
        m2 = m2_of(d) * count / len(d) if len(d) else 0.0
        return SeriesData(
            count=count,
            total_ns=total_ns,
            errors=errors,
            m2=m2,
            min_ns=int(d.min()) if len(d) else 0,
            max_ns=int(d.max()) if len(d) else 0,
            durations_ns=d,
            starts_ns=self.starts_ns[mask],
            threads=self.threads[mask],
            sample_errors=self.sample_errors[mask],
        )

    def same_as(self, other: SeriesData) -> bool:
        return (
            (self.count, self.total_ns, self.errors, self.min_ns, self.max_ns)
            == (other.count, other.total_ns, other.errors, other.min_ns, other.max_ns)
            and math.isclose(self.m2, other.m2, rel_tol=1e-9, abs_tol=1e-3)
            and all(
                np.array_equal(a, b)
                for a, b in (
                    (self.durations_ns, other.durations_ns),
                    (self.starts_ns, other.starts_ns),
                    (self.threads, other.threads),
                    (self.sample_errors, other.sample_errors),
                )
            )
        )


def m2_of(durations_ns: I64) -> float:
    """Sum of squared deviations of exact samples, as numpy computes it for ``np.var``."""
    if len(durations_ns) == 0:
        return 0.0
    x = durations_ns.astype(np.float64)
    return float(np.var(x) * len(x))


def combine(parts: list[SeriesData], thread_maps: list[I64]) -> SeriesData:
    """Merge windows of the same series from several sources (Chan's parallel variance).

    ``thread_maps[i]`` renumbers part ``i``'s thread indexes into the merged thread table.
    """
    count = sum(p.count for p in parts)
    total = sum(p.total_ns for p in parts)
    mean = total / count if count else 0.0
    m2 = sum(p.m2 + p.count * (p.total_ns / p.count - mean) ** 2 for p in parts if p.count)
    return SeriesData(
        count=count,
        total_ns=total,
        errors=sum(p.errors for p in parts),
        m2=m2,
        min_ns=min(p.min_ns for p in parts),
        max_ns=max(p.max_ns for p in parts),
        durations_ns=np.concatenate([p.durations_ns for p in parts]),
        starts_ns=np.concatenate([p.starts_ns for p in parts]),
        threads=np.concatenate([m[p.threads] for p, m in zip(parts, thread_maps, strict=False)]),
        sample_errors=np.concatenate([p.sample_errors for p in parts]),
    )


def series_from_dict(f: Fields, raw: object, where: str, n_threads: int) -> SeriesData:
    """A series as ``Snapshot.to_dict`` wrote it, every field and invariant checked (``f`` names
    what is wrong): counts >= 0, columns of one length, indexes in range."""
    s = f.mapping(raw, where)
    count, total, errors = (f.integer(s, k, where) for k in ("count", "total_ns", "errors"))
    if count < 1 or errors > count:
        raise f.fail(f"{where}.count", f"must be >= 1 and >= errors ({errors}), got {count}")
    durations, starts, threads = (f.column(s, k, where) for k in ("durations_ns", "starts_ns", "threads"))
    marks = f.column(s, "error_samples", where)
    if not len(durations) == len(starts) == len(threads) <= count:
        raise f.fail(
            where,
            f"columns must have one length, at most count ({count}): durations_ns {len(durations)}, "
            f"starts_ns {len(starts)}, threads {len(threads)}",
        )
    if len(threads) and (threads.min() < 0 or threads.max() >= n_threads):
        raise f.fail(f"{where}.threads", f"must index threads (0..{n_threads - 1})")
    if len(marks) and (marks.min() < 0 or marks.max() >= len(durations)):
        raise f.fail(f"{where}.error_samples", f"must index the samples (0..{len(durations) - 1})")
    if len(durations) and durations.min() < 0:
        raise f.fail(f"{where}.durations_ns", "must be >= 0")
    sample_errors = np.zeros(len(durations), dtype=np.bool_)
    sample_errors[marks] = True
    m2 = f.number(s, "m2", where)
    lo, hi = f.integer(s, "min_ns", where), f.integer(s, "max_ns", where)
    if m2 < 0 or lo > hi:
        raise f.fail(where, f"needs m2 >= 0 and min_ns <= max_ns, got m2={m2}, min_ns={lo}, max_ns={hi}")
    return SeriesData(count, total, errors, m2, lo, hi, durations, starts, threads, sample_errors)
