"""Gauge series: sampled values over time (memory, utilisation), bounded like timings.

A gauge keeps its newest ``capacity`` (time, value) samples in a ring and exact
running count and sum, so a window's mean is exact however long it is; min,
max, last value and the time of the peak come from the retained samples.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ._ring import I64
from ._validate import Fields

F64 = npt.NDArray[np.float64]


@dataclass(frozen=True)
class GaugeStats:
    """A gauge over a window: ``peak_at_s`` is when ``max`` was seen, in seconds from the window's start.

    >>> import perfkit
    >>> reg = perfkit.Registry()
    >>> reg.gauge("process.rss_mb", 512.0); reg.gauge("process.rss_mb", 768.0)
    >>> reg.snapshot().gauges["process.rss_mb"].max
    768.0
    """

    count: int
    min: float
    mean: float
    max: float
    last: float
    peak_at_s: float
    n_samples: int
    span_s: float = 0.0
    """From the first retained sample to the last: how much of the window the samples cover."""


@dataclass(frozen=True, eq=False)
class GaugeData:
    """The retained samples of a gauge in a window (oldest first) and its exact count and sum."""

    count: int
    total: float
    times_ns: I64
    values: F64

    def stats(self, window_start_ns: int) -> GaugeStats:
        v = self.values
        peak = int(np.argmax(v))
        return GaugeStats(
            count=self.count,
            min=float(v.min()),
            mean=self.total / self.count,
            max=float(v[peak]),
            last=float(v[-1]),
            peak_at_s=(int(self.times_ns[peak]) - window_start_ns) / 1e9,
            n_samples=len(v),
            span_s=(int(self.times_ns[-1]) - int(self.times_ns[0])) / 1e9,
        )

    def same_as(self, other: GaugeData) -> bool:
        return (
            self.count == other.count
            and bool(np.isclose(self.total, other.total))
            and np.array_equal(self.times_ns, other.times_ns)
            and np.array_equal(self.values, other.values)
        )

    @staticmethod
    def combine(parts: list[GaugeData]) -> GaugeData:
        times = np.concatenate([p.times_ns for p in parts])
        order = np.argsort(times, kind="stable")
        return GaugeData(
            count=sum(p.count for p in parts),
            total=sum(p.total for p in parts),
            times_ns=times[order],
            values=np.concatenate([p.values for p in parts])[order],
        )


class GaugeRing:
    """Newest ``capacity`` samples of one gauge, with exact count and sum over all of them.

    Allocated small and doubled as it fills, up to ``capacity``.
    """

    __slots__ = ("_times", "_values", "capacity", "total", "written")

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        size = min(capacity, 16)
        self._times = np.zeros(size, np.int64)
        self._values = np.zeros(size, np.float64)
        self.written = 0
        self.total = 0.0

    def add(self, t_ns: int, value: float) -> None:
        size = len(self._times)
        if self.written == size and size < self.capacity:  # nothing wrapped yet: positions are kept
            grown = min(self.capacity, 2 * size)
            self._times = np.concatenate([self._times, np.zeros(grown - size, np.int64)])
            self._values = np.concatenate([self._values, np.zeros(grown - size, np.float64)])
        pos = self.written % self.capacity
        self._times[pos] = t_ns
        self._values[pos] = value
        self.written += 1
        self.total += value

    def window(self, since_written: int, since_total: float) -> GaugeData | None:
        count = self.written - since_written
        if count <= 0:
            return None
        n = min(count, self.capacity)
        idx = np.arange(self.written - n, self.written) % self.capacity
        return GaugeData(count, self.total - since_total, self._times[idx], self._values[idx])


class Gauges:
    """A registry's gauges by name: at most ``max_series`` of them, each a ``GaugeRing``."""

    __slots__ = ("capacity", "max_series", "rings")

    def __init__(self, capacity: int, max_series: int) -> None:
        self.capacity = capacity
        self.max_series = max_series
        self.rings: dict[str, GaugeRing] = {}

    def add(self, name: str, t_ns: int, value: float) -> bool:
        """Add a sample; False when ``name`` is new past ``max_series`` (the caller counts the drop)."""
        ring = self.rings.get(name)
        if ring is None:
            if len(self.rings) >= self.max_series:
                return False
            ring = self.rings[name] = GaugeRing(self.capacity)
        ring.add(t_ns, value)
        return True

    def marks(self) -> dict[str, tuple[int, float]]:
        """Each gauge's running count and sum (what a cursor remembers)."""
        return {name: (g.written, g.total) for name, g in self.rings.items()}


def check_value(name: str, value: object) -> float:
    """A gauge sample as a float; bools, NaN and inf are refused, naming the gauge."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"value of gauge {name!r} must be a finite number, got {value!r}")
    return float(value)


def gauge_from_dict(f: Fields, raw: object, where: str) -> GaugeData:
    """A gauge as ``Snapshot.to_dict`` wrote it, checked (``f`` names what is wrong)."""
    g = f.mapping(raw, where)
    count = f.integer(g, "count", where)
    times, values = f.column(g, "times_ns", where), f.column(g, "values", where, kind="f")
    if not 1 <= len(times) == len(values) <= count:
        raise f.fail(
            where,
            f"needs 1 <= len(times_ns) == len(values) <= count, got {len(times)}, {len(values)}, {count}",
        )
    return GaugeData(count, f.number(g, "total", where), times, values)
