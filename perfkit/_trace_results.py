"""Result types of trace analysis: frozen dataclasses that turn into plain JSON with ``to_dict``."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from ._trace_phases import ALL_PHASES


@dataclass(frozen=True)
class OpStat:
    """One CPU op name: calls, self time (minus nested ops), total time, share of all op self time."""

    name: str
    count: int
    self_us: float
    total_us: float
    share: float


@dataclass(frozen=True)
class KernelStat:
    """One GPU activity name (``kind``: kernel, memcpy or memset); share of all GPU activity time."""

    name: str
    kind: str
    count: int
    total_us: float
    share: float


@dataclass(frozen=True)
class MemoryPeak:
    """Highest ``Total Allocated`` / ``Total Reserved`` seen in the ``[memory]`` events of a device."""

    device: str
    allocated_bytes: int
    reserved_bytes: int


@dataclass(frozen=True)
class PhaseSplit:
    """Where one window's time went, in µs; the phases add up to ``total_us``.

    >>> s = PhaseSplit("all", 100.0, 62.0, 20.0, 10.0, 5.0, 3.0)
    >>> s.share("data_loading")
    0.62
    """

    label: str
    total_us: float
    data_loading_us: float
    forward_us: float
    backward_us: float
    optimizer_us: float
    unaccounted_us: float

    def us(self, phase: str) -> float:
        if phase not in ALL_PHASES:
            raise ValueError(f"phase must be one of {ALL_PHASES}, got {phase!r}")
        value: float = getattr(self, f"{phase}_us")
        return value

    def share(self, phase: str) -> float:
        """Fraction of ``total_us`` (0 for an empty window)."""
        return self.us(phase) / self.total_us if self.total_us > 0 else 0.0

    @property
    def shares(self) -> dict[str, float]:
        return {phase: self.share(phase) for phase in ALL_PHASES}

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "shares": self.shares}


@dataclass(frozen=True)
class SectionStat:
    """A perfkit section found in the trace: ranges, time inside the profiled steps, share of it."""

    name: str
    count: int
    total_us: float
    share: float


@dataclass(frozen=True)
class Finding:
    """A likely bottleneck in words; ``value`` is the fraction that crossed its threshold."""

    kind: str
    message: str
    value: float


@dataclass(frozen=True)
class TraceAnalysis:
    """What :func:`perfkit.analyze_trace` found in one torch profiler trace.

    ``span_us`` is the profiled step time: the sum of the ``ProfilerStep#N`` ranges, or the span
    of the main thread's ranges when there are none; ``per_step`` holds one split per step (one
    for the whole span without steps). Op times cover the whole trace.
    """

    path: str
    event_count: int
    step_count: int
    span_us: float
    top_cpu_ops: tuple[OpStat, ...]
    top_cuda_kernels: tuple[KernelStat, ...]
    gpu_busy_share: float | None
    memory: tuple[MemoryPeak, ...]
    phases: PhaseSplit
    per_step: tuple[PhaseSplit, ...]
    sections: tuple[SectionStat, ...]
    findings: tuple[Finding, ...]

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["phases"] = self.phases.to_dict()
        out["per_step"] = [s.to_dict() for s in self.per_step]
        return out


@dataclass(frozen=True)
class PhaseChange:
    """One phase in two traces: µs per step and share of step time, before and after."""

    phase: str
    before_us: float
    after_us: float
    before_share: float
    after_share: float
    change_us: float = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "change_us", self.after_us - self.before_us)


@dataclass(frozen=True)
class TimeChange:
    """An op or section in two traces: µs per step before and after (0 where absent)."""

    name: str
    before_us: float
    after_us: float
    change_us: float = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "change_us", self.after_us - self.before_us)


@dataclass(frozen=True)
class TraceDiff:
    """Two traces compared per step (a trace without steps counts as one step).

    ``grown_ops``: ops in both traces whose self time per step grew most; ``new_ops``: ops only
    in the second trace; ``grown_sections``: sections whose time per step grew.
    """

    before: str
    after: str
    before_steps: int
    after_steps: int
    before_step_us: float
    after_step_us: float
    phases: tuple[PhaseChange, ...]
    grown_ops: tuple[TimeChange, ...]
    new_ops: tuple[TimeChange, ...]
    grown_sections: tuple[TimeChange, ...]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
