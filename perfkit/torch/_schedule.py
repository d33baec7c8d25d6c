"""Which steps of an epoch a profiler window covers.

Like ``torch.profiler.schedule`` (skip_first, then ``repeat`` cycles of wait,
warmup, active), but computed per stage epoch from the batch index, and each
cycle is its own profiler session: ``repeat`` really repeats (Lightning's
PyTorchProfiler records only the first cycle, Lightning issue 14063).
"""

from __future__ import annotations

from dataclasses import dataclass

from .._validate import check_int


@dataclass(frozen=True)
class Cycle:
    """Steps ``[warmup_start, record_start)`` warm the profiler up, ``[record_start, end)`` are recorded."""

    index: int
    warmup_start: int
    record_start: int
    end: int


MAX_STEPS = 1_000_000
"""Largest ``skip_first``, ``wait``, ``warmup`` and ``active``: a window of a million steps."""
MAX_REPEAT = 1000
"""Largest ``repeat``: each cycle is a profiler session and a trace file."""


@dataclass(frozen=True)
class Schedule:
    """Steps of one stage epoch: ``skip_first``, then ``repeat`` cycles of ``wait``, ``warmup``,
    ``active`` (each at most ``MAX_STEPS``; ``repeat`` at most ``MAX_REPEAT``)."""

    skip_first: int = 0
    wait: int = 0
    warmup: int = 5
    active: int = 100
    repeat: int = 1

    def __post_init__(self) -> None:
        for name in ("skip_first", "wait", "warmup"):
            check_int(getattr(self, name), name, high=MAX_STEPS)
        check_int(self.active, "active (profile_steps)", low=1, high=MAX_STEPS)
        check_int(self.repeat, "repeat", low=1, high=MAX_REPEAT)

    def cycles(self) -> list[Cycle]:
        """The cycles of one stage epoch, in step order.

        >>> [(c.warmup_start, c.record_start, c.end) for c in Schedule(1, 1, 1, 2, 2).cycles()]
        [(2, 3, 5), (6, 7, 9)]
        """
        length = self.wait + self.warmup + self.active
        out = []
        for k in range(self.repeat):
            start = self.skip_first + k * length + self.wait
            out.append(Cycle(k + 1, start, start + self.warmup, start + self.warmup + self.active))
        return out
