"""A change followed, timed against the run as configured, and judged against the machine's own noise.

The advice tests measure what following a verdict's change saves: runs as configured and runs
with the change are interleaved (configured, followed, configured, ...) and their medians
compared, by the test's own clock. A fixed margin on that saving flips on a busy machine (CI once
measured 49.2% against a bound of 50.4%, with other work on both cores). So the noise is measured
in the same test: the spread of each side's runs (half its range) over the configured median,
both sides added; pairs are added until that noise is narrow (``NARROW``) or ``MAX_PAIRS`` ran,
and every bound is widened by it (``within``). A quiet machine is judged as tightly as before; a
busy one by what it actually showed.

>>> p = Paired(before=(1.0, 1.1, 0.9), after=(0.5, 0.5, 0.5))
>>> round(p.saving, 3), round(p.noise, 3)
(0.5, 0.1)
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass

MIN_PAIRS = 3
MAX_PAIRS = 7
NARROW = 0.03
"""The noise (a fraction of the configured time) at which no more pairs are run."""


@dataclass(frozen=True)
class Paired:
    """Seconds of each run as configured (``before``) and with the change followed (``after``)."""

    before: tuple[float, ...]
    after: tuple[float, ...]

    @property
    def saving(self) -> float:
        """The fraction of the configured time the change saved (medians)."""
        return 1 - statistics.median(self.after) / statistics.median(self.before)

    @property
    def noise(self) -> float:
        """How far the saving moves on the machine's noise alone, as measured here."""
        base = statistics.median(self.before)
        half = [(max(side) - min(side)) / 2 for side in (self.before, self.after)]
        return sum(half) / base

    def within(self, margin: float) -> float:
        """A bound's margin: ``margin`` on a quiet machine, the noise measured here where it is larger."""
        return max(margin, self.noise)


def paired(configured: Callable[[], float], followed: Callable[[], float], first: float) -> Paired:
    """Interleaved runs, ``first`` (a configured run already made) first, until the noise is narrow."""
    before, after = [first], []
    while True:
        after.append(followed())
        result = Paired(tuple(before), tuple(after))
        if len(after) >= MAX_PAIRS or (len(after) >= MIN_PAIRS and result.noise <= NARROW):
            return result
        before.append(configured())
