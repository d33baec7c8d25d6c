"""One series' storage: a fixed-size ring of its newest records plus exact running totals.

The ring is four numpy columns (start, duration, node, error), allocated small
and grown geometrically up to ``capacity``, so its memory is set by ``capacity``
alone however many records pass through, and a series that saw ten records
holds room for about ten. The totals (count, sum, error count, min, max, and shifted power sums for the
variance) are updated from every record before the ring can overwrite it, so
they stay exact for the whole run and, by difference with a cursor's marks,
for any window.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

I64 = npt.NDArray[np.int64]
Bools = npt.NDArray[np.bool_]
_FIRST = 16  # records a new ring has room for; it doubles as it fills, up to its capacity
_I64_MAX = 2**63 - 1


@dataclass(frozen=True)
class Marks:
    """A series' running totals at one instant (what a cursor remembers)."""

    written: int
    total_ns: int
    errors: int
    shifted_sum: int
    shifted_sq: float


@dataclass(frozen=True)
class Retained:
    """The retained records of a window, oldest first."""

    starts_ns: I64
    durations_ns: I64
    nodes: I64
    errors: Bools


class Ring:
    """Newest ``capacity`` records of one series, and totals over all of them."""

    __slots__ = (
        "_durations",
        "_errors",
        "_nodes",
        "_starts",
        "capacity",
        "errors",
        "max_ns",
        "min_ns",
        "shift_ns",
        "shifted_sq",
        "shifted_sum",
        "total_ns",
        "written",
    )

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        size = min(capacity, _FIRST)
        self._starts = np.zeros(size, np.int64)
        self._durations = np.zeros(size, np.int64)
        self._nodes = np.zeros(size, np.int64)
        self._errors = np.zeros(size, np.bool_)
        self.written = 0
        self.total_ns = 0
        self.errors = 0
        self.min_ns = 0
        self.max_ns = 0
        # Power sums of (duration - shift) keep the variance free of cancellation
        # when the spread is small next to the mean (the usual case for step times).
        self.shift_ns = 0
        self.shifted_sum = 0
        self.shifted_sq = 0.0

    def extend(self, starts: I64, durations: I64, nodes: I64, errors: Bools) -> None:
        """Append a batch (oldest first); totals first, then the ring keeps the newest."""
        n = len(durations)
        if n == 0:
            return
        if self.written == 0:
            self.shift_ns = int(durations[0])
            self.min_ns = int(durations.min())
            self.max_ns = int(durations.max())
        else:
            self.min_ns = min(self.min_ns, int(durations.min()))
            self.max_ns = max(self.max_ns, int(durations.max()))
        shifted = durations - self.shift_ns
        self.total_ns += _exact_sum(durations, self.max_ns)
        self.shifted_sum += _exact_sum(shifted, max(abs(self.max_ns - self.shift_ns), self.shift_ns))
        self.shifted_sq += float(np.dot(shifted.astype(np.float64), shifted.astype(np.float64)))
        self.errors += int(np.count_nonzero(errors))
        cap = self.capacity
        if len(self._durations) < cap and self.written + n > len(self._durations):
            self._grow(min(cap, max(2 * len(self._durations), self.written + n)))
        if n > cap:
            starts, durations, nodes, errors = starts[-cap:], durations[-cap:], nodes[-cap:], errors[-cap:]
            self.written += n - cap
            n = cap
        pos = self.written % cap
        first = min(n, cap - pos)
        for column, values in (
            (self._starts, starts),
            (self._durations, durations),
            (self._nodes, nodes),
            (self._errors, errors),
        ):
            column[pos : pos + first] = values[:first]
            column[: n - first] = values[first:]
        self.written += n

    def _grow(self, size: int) -> None:
        # Only while nothing wrapped (written <= old size): the records keep their positions.
        for attr in ("_starts", "_durations", "_nodes", "_errors"):
            old = getattr(self, attr)
            new = np.zeros(size, old.dtype)
            new[: len(old)] = old
            setattr(self, attr, new)

    @property
    def nbytes(self) -> int:
        """Bytes the columns hold now (at most ``capacity`` x 25)."""
        return sum(c.nbytes for c in (self._starts, self._durations, self._nodes, self._errors))

    def marks(self) -> Marks:
        return Marks(self.written, self.total_ns, self.errors, self.shifted_sum, self.shifted_sq)

    def retained_since(self, written: int) -> Retained:
        """Copies of the retained records written after the ``written``-th, oldest first."""
        n = min(self.written - written, self.capacity)
        idx = (np.arange(self.written - n, self.written) % self.capacity) if n else np.zeros(0, np.int64)
        return Retained(self._starts[idx], self._durations[idx], self._nodes[idx], self._errors[idx])

    def window_m2(self, since: Marks | None) -> float:
        """Sum of squared deviations from the window's mean, from the power sums (exact data, float math)."""
        count, s1, s2 = self.written, self.shifted_sum, self.shifted_sq
        if since is not None:
            count, s1, s2 = count - since.written, s1 - since.shifted_sum, s2 - since.shifted_sq
        return max(0.0, s2 - s1 * s1 / count) if count else 0.0


def _exact_sum(values: I64, bound: int) -> int:
    """``values.sum()`` as an exact int: in int64 where ``len * bound`` cannot overflow it."""
    if bound * len(values) <= _I64_MAX:
        return int(values.sum())
    return sum(values.tolist())  # durations of days each, by the thousand: rare, and slower
