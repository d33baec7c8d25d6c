"""Result types of trace analysis: frozen dataclasses that turn into plain JSON with ``to_dict``.

Times are µs, shares are fractions of the profiled step time unless a docstring says otherwise.
``TraceAnalysis.from_dict`` reads what ``to_dict`` wrote, of its format (``ANALYSIS_FORMAT``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from typing import Any, TypeVar

from .._formats import ANALYSIS_FORMAT, FormatError, check_format
from .._rule import Verdict
from ._parts import ALL_PARTS

T = TypeVar("T")


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
    """One device activity name (``kind``: kernel, memcpy or memset); share of all device activity time."""

    name: str
    kind: str
    count: int
    total_us: float
    share: float


@dataclass(frozen=True)
class TransferStat:
    """Copies (memcpy) or fills (memset) of one name: bytes moved and the bandwidth they ran at.

    ``gb_per_s`` is over the events that state their bytes (None when none does).
    """

    name: str
    kind: str
    count: int
    total_us: float
    total_bytes: int
    gb_per_s: float | None


@dataclass(frozen=True)
class MemoryPeak:
    """The peak memory of one device in its ``[memory]`` events.

    ``source`` says how: ``"Total Allocated"`` (the allocator's own total, newer torch) or
    ``"Bytes running sum"`` (older torch writes only each allocation's signed size: the peak is
    the growth over what was allocated when profiling started).
    """

    device: str
    allocated_bytes: int
    reserved_bytes: int
    source: str = "Total Allocated"


@dataclass(frozen=True)
class StreamIdle:
    """Idle gaps of one device stream inside the steps, by cause (HTA's vocabulary).

    ``host_wait_us``: the next activity was launched by the CPU only after the gap began;
    ``kernel_wait_us``: it was launched in time and the gap is under ``KERNEL_WAIT_US`` (launch
    overhead); ``other_us``: launched in time, yet the stream waited longer (a synchronisation,
    an event from another stream, communication). ``stream`` is ``"all streams"`` for the gaps of
    the device as a whole (no stream busy).
    """

    stream: str
    busy_us: float
    host_wait_us: float
    kernel_wait_us: float
    other_us: float

    @property
    def idle_us(self) -> float:
        return self.host_wait_us + self.kernel_wait_us + self.other_us


@dataclass(frozen=True)
class CommOverlap:
    """Communication kernels (NCCL, RCCL, HCCL) against compute kernels inside the steps.

    ``overlap_share``: the part of the communication time during which a compute kernel ran.
    """

    comm_us: float
    compute_us: float
    overlap_us: float
    overlap_share: float


@dataclass(frozen=True)
class PartSplit:
    """Where one window's time went, in µs; the parts (``ALL_PARTS``) add up to ``total_us``.

    >>> s = PartSplit("all", 100.0, 62.0, 20.0, 10.0, 5.0, 3.0)
    >>> s.share("data_wait")
    0.62
    """

    label: str
    total_us: float
    data_wait_us: float
    forward_us: float
    backward_us: float
    optimizer_us: float
    other_us: float

    def us(self, part: str) -> float:
        if part not in ALL_PARTS:
            raise ValueError(f"part must be one of {ALL_PARTS}, got {part!r}")
        value: float = getattr(self, f"{part}_us")
        return value

    def share(self, part: str) -> float:
        """Fraction of ``total_us`` (0 for an empty window)."""
        return self.us(part) / self.total_us if self.total_us > 0 else 0.0

    @property
    def shares(self) -> dict[str, float]:
        return {part: self.share(part) for part in ALL_PARTS}

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "shares": self.shares}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PartSplit:
        return cls(str(data["label"]), *(float(data[f"{p}_us"]) for p in ("total", *ALL_PARTS)))


@dataclass(frozen=True)
class PartSource:
    """Time of a part credited to one mark: the mark's name and where it came from.

    ``source`` is one of ``_parts.SOURCES`` ("perfkit", "user annotation", "Lightning", "torch",
    "autograd thread"); for part ``"other"`` the source is ``"annotation"``, the name an
    annotation that marks no part, and ``us`` the other time inside it.
    """

    part: str
    source: str
    name: str
    us: float
    share: float


@dataclass(frozen=True)
class SectionStat:
    """A perfkit section found in the trace: ranges, time inside the profiled steps, share of it."""

    name: str
    count: int
    total_us: float
    share: float


@dataclass(frozen=True)
class AnnotationStat:
    """One annotation name (``kind``: ``"cpu"`` user annotation or ``"gpu"`` user annotation):
    ranges in the steps, their time inside the steps (nested ranges of the same name count once
    per range), share of step time."""

    name: str
    kind: str
    count: int
    total_us: float
    share: float


@dataclass(frozen=True)
class Skipped:
    """Events of the file left out of the analysis, and why (``"ts not a number"``)."""

    reason: str
    count: int


@dataclass(frozen=True)
class TraceAnalysis:
    """What :func:`perfkit.trace.analyze_trace` found in one torch profiler trace.

    ``span_us`` is the profiled step time: the sum of the ``ProfilerStep#N`` ranges, or the span
    of the main thread (and the device work) when there are none; ``per_step`` holds one split
    per step. Op and kernel times cover the whole trace; busy shares, idle gaps, parts,
    sections and annotations cover the steps. ``gpu_busy_share`` counts every device activity
    (kernels, copies, fills), ``kernel_busy_share`` kernels only; both are None without device
    activity. ``unlaunched_device_us``: device time in the steps whose launch is not in the trace
    (work launched before profiling started), counted as busy all the same.
    """

    path: str
    event_count: int
    step_count: int
    span_us: float
    top_cpu_ops: tuple[OpStat, ...]
    top_cuda_kernels: tuple[KernelStat, ...]
    gpu_busy_share: float | None
    memory: tuple[MemoryPeak, ...]
    parts: PartSplit
    per_step: tuple[PartSplit, ...]
    sections: tuple[SectionStat, ...]
    findings: tuple[Verdict, ...]
    kernel_busy_share: float | None = None
    unlaunched_device_us: float = 0.0
    idle: tuple[StreamIdle, ...] = ()
    transfers: tuple[TransferStat, ...] = ()
    comm: CommOverlap | None = None
    part_sources: tuple[PartSource, ...] = ()
    annotations: tuple[AnnotationStat, ...] = ()
    skipped: tuple[Skipped, ...] = ()
    rank: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON of every field, with its format (``ANALYSIS_FORMAT``)."""
        out = {"format": ANALYSIS_FORMAT, **asdict(self)}
        out["parts"] = self.parts.to_dict()
        out["per_step"] = [s.to_dict() for s in self.per_step]
        out["findings"] = [v.to_dict() for v in self.findings]
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TraceAnalysis:
        """Read ``to_dict``'s output back (as a run directory's ``traces.jsonl`` stores it).

        Raises ``FormatError`` for another format, ``ValueError`` naming what is missing or malformed.
        """
        try:
            check_format("the trace analysis", data, ANALYSIS_FORMAT, unnumbered=1)
            return cls(**_fields(data))
        except FormatError:
            raise
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ValueError(f"not a perfkit trace analysis: {exc!r}") from None


def _fields(data: Mapping[str, Any]) -> dict[str, Any]:
    busy, kernel_busy, comm, rank = (data[k] for k in ("gpu_busy_share", "kernel_busy_share", "comm", "rank"))
    return {
        "path": str(data["path"]),
        "event_count": int(data["event_count"]),
        "step_count": int(data["step_count"]),
        "span_us": float(data["span_us"]),
        "top_cpu_ops": _rows(OpStat, data["top_cpu_ops"]),
        "top_cuda_kernels": _rows(KernelStat, data["top_cuda_kernels"]),
        "gpu_busy_share": None if busy is None else float(busy),
        "memory": _rows(MemoryPeak, data["memory"]),
        "parts": PartSplit.from_dict(data["parts"]),
        "per_step": tuple(PartSplit.from_dict(row) for row in data["per_step"]),
        "sections": _rows(SectionStat, data["sections"]),
        "findings": tuple(Verdict.from_dict(row) for row in data["findings"]),
        "kernel_busy_share": None if kernel_busy is None else float(kernel_busy),
        "unlaunched_device_us": float(data["unlaunched_device_us"]),
        "idle": _rows(StreamIdle, data["idle"]),
        "transfers": _rows(TransferStat, data["transfers"]),
        "comm": None if comm is None else CommOverlap(**comm),
        "part_sources": _rows(PartSource, data["part_sources"]),
        "annotations": _rows(AnnotationStat, data["annotations"]),
        "skipped": _rows(Skipped, data["skipped"]),
        "rank": None if rank is None else int(rank),
    }


def _rows(kind: Callable[..., T], rows: Any) -> tuple[T, ...]:
    return tuple(kind(**row) for row in rows)
