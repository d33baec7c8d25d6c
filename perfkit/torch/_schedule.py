"""Which steps of an epoch a profiler window covers.

Like ``torch.profiler.schedule`` (skip_first, then ``repeat`` cycles of wait,
warmup, active), but computed per phase epoch from the batch index, and each
cycle is its own profiler session: ``repeat`` really repeats (Lightning's
PyTorchProfiler records only the first cycle, Lightning issue 14063).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Cycle:
    """Steps ``[warmup_start, record_start)`` warm the profiler up, ``[record_start, end)`` are recorded."""

    index: int
    warmup_start: int
    record_start: int
    end: int


@dataclass(frozen=True)
class Schedule:
    skip_first: int = 0
    wait: int = 0
    warmup: int = 5
    active: int = 100
    repeat: int = 1

    def __post_init__(self) -> None:
        for name in ("skip_first", "wait", "warmup", "repeat"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{name} must be an int >= 0, got {value!r}")
        if isinstance(self.active, bool) or not isinstance(self.active, int) or self.active < 1:
            raise ValueError(f"active (profile_steps) must be an int >= 1, got {self.active!r}")
        if self.repeat == 0:
            raise ValueError("repeat must be >= 1: a window per epoch needs at least one cycle, got 0")

    def cycles(self) -> list[Cycle]:
        """The cycles of one phase epoch, in step order.

        >>> [(c.warmup_start, c.record_start, c.end) for c in Schedule(1, 1, 1, 2, 2).cycles()]
        [(2, 3, 5), (6, 7, 9)]
        """
        length = self.wait + self.warmup + self.active
        out = []
        for k in range(self.repeat):
            start = self.skip_first + k * length + self.wait
            out.append(Cycle(k + 1, start, start + self.warmup, start + self.warmup + self.active))
        return out
