"""``Sketch``: a fixed-size quantile summary that merges by adding counts (DDSketch's log buckets).

A value ``x`` falls in bucket ``i = ceil(log(x) / log(gamma))`` with ``gamma = (1 + a) / (1 - a)``:
the bucket spans ``(gamma**(i-1), gamma**i]`` and its midpoint ``2 gamma**i / (gamma + 1)`` is
within ``a`` (``RELATIVE_ACCURACY``, 1%) of every value in it. So the sketch's quantile is within
1% of the exact one (``numpy.quantile(..., method="lower")``) whatever the data, and the sketches of
several ranks merge exactly by adding their counts: one ``all_reduce`` of a fixed-size vector,
however many ranks and samples there are. Why not merge the ranks' retained samples: their bytes
grow with ranks x samples, and every rank would receive every other rank's.

The buckets cover ``MIN_S`` to ``MAX_S`` (1 ns to 11 days): below, a value counts in the zero
bucket (read back as 0); above, in the last bucket.

>>> import numpy as np
>>> a, b = Sketch.of(np.full(90, 0.010)), Sketch.of(np.full(10, 0.500))
>>> merged = a.merge(b)
>>> merged.count, round(merged.quantile(0.5), 3), round(merged.quantile(0.99), 2)
(100, 0.01, 0.5)
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np
import numpy.typing as npt

RELATIVE_ACCURACY = 0.01
GAMMA = (1 + RELATIVE_ACCURACY) / (1 - RELATIVE_ACCURACY)
_LOG_GAMMA = math.log(GAMMA)
MIN_S = 1e-9
MAX_S = 1e6
_LOW = math.floor(math.log(MIN_S) / _LOG_GAMMA)  # the index of the first bucket above zero
BUCKETS = math.ceil(math.log(MAX_S) / _LOG_GAMMA) - _LOW + 2
"""The length of every sketch's counts: the zero bucket, then one per power of ``GAMMA``."""

Counts = npt.NDArray[np.int64]


class Sketch:
    """Counts of values per log bucket (``BUCKETS`` of them, whatever was added); see the module."""

    __slots__ = ("counts",)

    def __init__(self, counts: Counts | None = None) -> None:
        if counts is None:
            counts = np.zeros(BUCKETS, dtype=np.int64)
        if counts.shape != (BUCKETS,):
            raise ValueError(f"a sketch has {BUCKETS} counts, got shape {counts.shape}")
        self.counts = counts

    @classmethod
    def of(cls, values: Iterable[float]) -> Sketch:
        """The sketch of ``values`` (seconds, or any positive quantity)."""
        sketch = cls()
        sketch.add(values)
        return sketch

    def add(self, values: Iterable[float]) -> None:
        """Count ``values`` in their buckets (NaN left out)."""
        x = np.asarray(values if isinstance(values, np.ndarray) else list(values), dtype=np.float64)
        x = x[~np.isnan(x)]
        self.counts += np.bincount(_index(x), minlength=BUCKETS)[:BUCKETS].astype(np.int64)

    def merge(self, *others: Sketch) -> Sketch:
        """The sketch of all their values together (what an ``all_reduce`` sum of the counts gives)."""
        return Sketch(self.counts + sum((o.counts for o in others), np.zeros(BUCKETS, np.int64)))

    @property
    def count(self) -> int:
        """How many values were added."""
        return int(self.counts.sum())

    def quantile(self, q: float) -> float:
        """The ``q`` quantile (0 to 1) within 1% of the exact lower quantile; NaN when empty."""
        if not 0.0 <= q <= 1.0:
            raise ValueError(f"q must be within [0, 1], got {q!r}")
        return float(self.quantiles(np.array([q]))[0])

    def values(self) -> npt.NDArray[np.float64]:
        """Every value added, as its bucket reads it back (each within 1%), in ascending order:
        the whole sample, for sketches small enough to spell out."""
        return np.repeat(_midpoints(), self.counts)

    def quantiles(self, qs: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        """``quantile`` at each of ``qs`` at once (one cumulative sum): what stands in for the
        retained samples of a series merged over many ranks (``perfkit.stages``' sketched merge)."""
        n = self.count
        if not n:
            return np.full(len(qs), math.nan)
        ranks = np.floor(np.asarray(qs, dtype=np.float64) * (n - 1))  # numpy's method="lower"
        i = np.searchsorted(np.cumsum(self.counts), ranks, side="right")
        return np.where(i == 0, 0.0, 2 * GAMMA ** (i - 1 + _LOW) / (GAMMA + 1))


def _midpoints() -> npt.NDArray[np.float64]:
    """Each bucket's value as the sketch reads it back (the zero bucket's is 0)."""
    i = np.arange(BUCKETS, dtype=np.float64)
    return np.where(i == 0, 0.0, 2 * GAMMA ** (i - 1 + _LOW) / (GAMMA + 1))


def _index(x: npt.NDArray[np.float64]) -> npt.NDArray[np.int64]:
    """Each value's bucket: 0 for values at or below ``MIN_S``, else 1 + its log index from ``_LOW``."""
    above = x > MIN_S
    out = np.zeros(x.shape, dtype=np.int64)
    logs = np.ceil(np.log(np.minimum(x[above], MAX_S)) / _LOG_GAMMA).astype(np.int64)
    out[above] = np.clip(logs - _LOW + 1, 1, BUCKETS - 1)
    return out
