"""Result types of trace analysis: frozen dataclasses that turn into plain JSON with ``to_dict``.

Times are µs, shares are fractions of the profiled step time unless a docstring says otherwise.
``TraceAnalysis.from_dict`` reads what ``to_dict`` wrote, also from before a field was added, and
the old names of perfkit 0.1 (``phases``, ``phase_sources``, ``data_loading_us``, ``unaccounted_us``),
which ``to_dict`` still writes beside the new ones for one release.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any, TypeVar

from .._rule import Verdict, severity
from .._warn import warn_deprecated
from ..names import OLD_TRACE_PARTS
from ._parts import ALL_PARTS
from ._rules import OLD_KINDS

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
        old = {f"{name}_us": self.us(part) for name, part in OLD_TRACE_PARTS.items()}  # for 0.1's readers
        return {**asdict(self), "shares": self.shares, **old}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PartSplit:
        old = {
            f"{part}_us": data[f"{name}_us"] for name, part in OLD_TRACE_PARTS.items() if f"{name}_us" in data
        }
        data = {**old, **data}
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

    @property
    def phases(self) -> PartSplit:
        """The old name of ``parts`` (perfkit 0.1), for one release."""
        warn_deprecated("TraceAnalysis.phases is now TraceAnalysis.parts")
        return self.parts

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["parts"] = self.parts.to_dict()
        out["per_step"] = [s.to_dict() for s in self.per_step]
        # The old keys of perfkit 0.1, beside the new ones for one release: its readers still load this.
        out["phases"] = dict(out["parts"])
        out["phase_sources"] = [old_row(s) for s in out["part_sources"]]
        out["findings"] = [
            {**v.to_dict(), "value": v.share} for v in self.findings
        ]  # value: share's old name
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TraceAnalysis:
        """Read ``to_dict``'s output back (as a run directory's ``traces.jsonl`` stores it).

        Raises ``ValueError`` naming what is missing or malformed.
        """
        try:
            data = _renamed(data)
            return cls(**_required(data), **_optional(data))
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ValueError(f"not a perfkit trace analysis: {exc!r}") from None


def _required(data: Mapping[str, Any]) -> dict[str, Any]:
    busy = data.get("gpu_busy_share")
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
        "findings": tuple(_finding(row) for row in data["findings"]),
    }


def _optional(data: Mapping[str, Any]) -> dict[str, Any]:
    """The fields added after the first release: absent in older ``traces.jsonl`` lines."""
    out: dict[str, Any] = {}
    readers: dict[str, Callable[[Any], Any]] = {
        "kernel_busy_share": lambda v: None if v is None else float(v),
        "unlaunched_device_us": float,
        "idle": lambda v: _rows(StreamIdle, v),
        "transfers": lambda v: _rows(TransferStat, v),
        "comm": lambda v: None if v is None else CommOverlap(**v),
        "part_sources": lambda v: _rows(PartSource, v),
        "annotations": lambda v: _rows(AnnotationStat, v),
        "skipped": lambda v: _rows(Skipped, v),
        "rank": lambda v: None if v is None else int(v),
    }
    for key, read in readers.items():
        if key in data:
            out[key] = read(data[key])
    return out


def _finding(row: Mapping[str, Any]) -> Verdict:
    """A finding as written now (a ``Verdict``), or as before one rule shape: kind, message, value."""
    if "share" in row:
        return Verdict.from_dict(row)
    value = float(row["value"])
    kind = OLD_KINDS.get(str(row["kind"]), str(row["kind"]).upper())
    return Verdict(kind, "", -1, None, value, value, severity(value), str(row["message"]))


def _renamed(data: Mapping[str, Any]) -> Mapping[str, Any]:
    """``data`` with the new keys where only perfkit 0.1's are there (``phases``, ``phase_sources``)."""
    out = dict(data)
    if "parts" not in out and "phases" in out:
        out["parts"] = out["phases"]
    if "part_sources" not in out and "phase_sources" in out:
        out["part_sources"] = [_new_row(row) for row in out["phase_sources"]]
    return out


def _new_row(row: Mapping[str, Any]) -> dict[str, Any]:
    """A row perfkit 0.1 wrote with a ``phase``, with its ``part`` instead."""
    rest = {k: v for k, v in row.items() if k != "phase"}
    return {"part": OLD_TRACE_PARTS.get(row["phase"], row["phase"]), **rest}


def old_row(row: Mapping[str, Any]) -> dict[str, Any]:
    """A row with a ``part`` as perfkit 0.1 wrote it: ``phase``, and the part's old name."""
    rest = {k: v for k, v in row.items() if k != "part"}
    return {"phase": _OLD_NAMES.get(row["part"], row["part"]), **rest}


_OLD_NAMES = {part: name for name, part in OLD_TRACE_PARTS.items()}


def _rows(kind: Callable[..., T], rows: Any) -> tuple[T, ...]:
    return tuple(kind(**row) for row in rows)


def field_names(cls: type) -> list[str]:
    """The fields of a result dataclass, in order (for tests that pin the JSON keys)."""
    return [f.name for f in fields(cls)]
