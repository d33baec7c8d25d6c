"""Result types of trace analysis: frozen dataclasses that turn into plain JSON with ``to_dict``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from ..findings import Finding
from ._phases import ALL_PHASES


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

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PhaseSplit:
        return cls(str(data["label"]), *(float(data[f"{p}_us"]) for p in ("total", *ALL_PHASES)))


@dataclass(frozen=True)
class SectionStat:
    """A perfkit section found in the trace: ranges, time inside the profiled steps, share of it."""

    name: str
    count: int
    total_us: float
    share: float


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

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TraceAnalysis:
        """Read ``to_dict``'s output back (as a run directory's ``traces.jsonl`` stores it).

        Raises ``ValueError`` naming what is missing or malformed.
        """
        try:
            busy = data.get("gpu_busy_share")
            return cls(
                path=str(data["path"]),
                event_count=int(data["event_count"]),
                step_count=int(data["step_count"]),
                span_us=float(data["span_us"]),
                top_cpu_ops=tuple(OpStat(**row) for row in data["top_cpu_ops"]),
                top_cuda_kernels=tuple(KernelStat(**row) for row in data["top_cuda_kernels"]),
                gpu_busy_share=None if busy is None else float(busy),
                memory=tuple(MemoryPeak(**row) for row in data["memory"]),
                phases=PhaseSplit.from_dict(data["phases"]),
                per_step=tuple(PhaseSplit.from_dict(row) for row in data["per_step"]),
                sections=tuple(SectionStat(**row) for row in data["sections"]),
                findings=tuple(Finding(**row) for row in data["findings"]),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"not a perfkit trace analysis: {exc!r}") from None


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
