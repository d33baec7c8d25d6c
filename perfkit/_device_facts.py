"""What the device's timers left in a window, read back for verdicts: the GPU's busy share (NVML),
sync stalls by call site, and host-to-device copies with what pinning them would gain.

``perfkit.torch.watch_syncs`` records each synchronizing call as ``sync.stall.SITE`` (the host's
blocked time) or ``sync.untimed.SITE`` (seen by CUDA's sync debug mode, duration unknown);
``perfkit.torch.time_copy`` records each batch's copy as ``h2d.copy`` (host time), ``h2d.copy.gpu``
(its time on the stream) and the gauges ``h2d.bytes`` / ``h2d.pinned_bytes``. These readers need
only a ``Snapshot``, so a verdict (``perfkit.findings``, which cannot import ``perfkit.torch``)
reads them for any window: a stage epoch, an interval, a merged rank.

>>> import perfkit
>>> reg = perfkit.Registry()
>>> for _ in range(3):
...     reg.record("sync.stall.train.py:42", 0, 2_000_000)
>>> [(s.site, s.count, round(s.total_s, 3)) for s in stall_sites(reg.snapshot())]
[('train.py:42', 3, 0.006)]
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ._snapshot import Snapshot
from ._units import format_bytes, format_seconds
from .names import H2D_BYTES, H2D_COPY, H2D_PINNED_BYTES, gpu_series, stall_site

NVML_SPAN_S = 2.0
"""How long NVML's utilisation samples must cover before a window's busy share is read from them.
NVML says the share of its last sample period (1/6 s to 1 s, by product) in which a kernel ran: a
sample lags the work by up to a period, and on an H200 a 0.3 s window busy 40% read 3%. Two
seconds of samples keep that lag under half a period's weight at most."""


def gpu_busy(snapshot: Snapshot) -> float | None:
    """The GPUs' mean utilisation over the window, 0 to 1, from NVML's samples (``gpuN.util_percent``),
    or None without samples covering ``NVML_SPAN_S``.

    >>> import perfkit
    >>> reg = perfkit.Registry()
    >>> for i in range(5):
    ...     reg.gauge("gpu0.util_percent", 40.0 + 10 * i, t_ns=i * 600_000_000)
    >>> gpu_busy(reg.snapshot())
    0.6
    """
    samples = [
        g.mean
        for name, g in snapshot.gauges.items()
        if name.endswith(".util_percent") and "memory" not in name and g.span_s >= NVML_SPAN_S
    ]
    return sum(samples) / len(samples) / 100 if samples else None


@dataclass(frozen=True)
class StallSite:
    """The synchronizations made at one call site in a window: how often, and how long the host was
    blocked in them (``timed`` False: seen by the sync debug mode only, ``total_s`` unknown, 0)."""

    site: str
    count: int
    total_s: float
    timed: bool

    @property
    def mean_s(self) -> float:
        return self.total_s / self.count if self.count else 0.0


def stall_sites(snapshot: Snapshot) -> list[StallSite]:
    """The window's sync stalls by call site: timed ones by total time, then untimed ones by count."""
    found: list[StallSite] = []
    for name in snapshot:
        parsed = stall_site(name)
        if parsed is not None:
            stats = snapshot[name]
            found.append(StallSite(parsed[0], stats.count, stats.total_s if parsed[1] else 0.0, parsed[1]))
    return sorted(found, key=lambda s: (not s.timed, -s.total_s, -s.count, s.site))


@dataclass(frozen=True)
class Copies:
    """A window's host-to-device copies of batches: how many, the host's time in them (blocked, for a
    pageable or blocking copy), their time on the stream (None without CUDA events), their bytes."""

    count: int
    host_s: float
    gpu_s: float | None
    bytes: float
    pinned_bytes: float

    @property
    def pinned_fraction(self) -> float:
        return self.pinned_bytes / self.bytes if self.bytes else 0.0


def copy_stats(snapshot: Snapshot) -> Copies | None:
    """The window's copies, or None where none was timed."""
    if H2D_COPY not in snapshot:
        return None
    host = snapshot[H2D_COPY]
    gpu_name = gpu_series(H2D_COPY)
    gpu = snapshot[gpu_name].total_s if gpu_name in snapshot else None
    return Copies(
        host.count, host.total_s, gpu, _gauge_sum(snapshot, H2D_BYTES), _gauge_sum(snapshot, H2D_PINNED_BYTES)
    )


def _gauge_sum(snapshot: Snapshot, name: str) -> float:
    g = snapshot.gauges.get(name)
    return g.count * g.mean if g is not None else 0.0


@dataclass(frozen=True)
class CopyAdvice:
    """What to change in the copies (``change``), what it is expected to save in the window's seconds
    (``gain_s``: low, high) and why, in words (``message``)."""

    change: dict[str, Any]
    gain_s: tuple[float, float]
    message: str


def copy_advice(found: Copies, *, pinned_gb_per_s: float | None = None) -> CopyAdvice | None:
    """Advice for copies that blocked the host, or None where they did not (pinned and non-blocking).

    A copy from pageable memory makes the host wait the whole copy (and runs slower: the driver
    stages it through a pinned buffer); from pinned memory with ``non_blocking=True`` the host
    returns at once and the copy overlaps the host's next work. So the host time spent in copies is
    the gain at best, and at least that less the pinned copies' own time on the stream (their
    bytes at ``pinned_gb_per_s``, measured on this machine by ``perfkit.torch.pinned_bandwidth``;
    unknown, the low end is 0). On an H200: 38.5 MB took 3.5 ms pageable, host blocked throughout,
    against 0.71 ms pinned and non-blocking, host back in 15 µs.

    >>> c = Copies(count=100, host_s=0.35, gpu_s=0.35, bytes=3.85e9, pinned_bytes=0.0)
    >>> a = copy_advice(c, pinned_gb_per_s=54.0)
    >>> a.change, [round(g, 3) for g in a.gain_s]
    ({'pin_memory': True, 'non_blocking': True}, [0.279, 0.35])
    """
    if found.count == 0 or found.host_s <= 0:
        return None
    pageable = found.bytes - found.pinned_bytes
    stream_s = found.gpu_s if found.gpu_s is not None else found.host_s
    if pageable <= 0 and found.host_s < 0.5 * stream_s:
        return None  # pinned, and the host did not wait for them: nothing left to gain here
    change: dict[str, Any] = (
        {"non_blocking": True} if pageable <= 0 else {"pin_memory": True, "non_blocking": True}
    )
    low = 0.0
    if pinned_gb_per_s is not None and pinned_gb_per_s > 0:
        low = max(0.0, found.host_s - found.bytes / (pinned_gb_per_s * 1e9))
    batches = "batch" if found.count == 1 else "batches"
    what = f"{found.count:,} {batches} copied to the device ({format_bytes(found.bytes)}"
    what += f", {1 - found.pinned_fraction:.0%} from pageable memory)" if pageable > 0 else ", all pinned)"
    fix = ", ".join(f"{k}={v}" for k, v in change.items())
    message = (
        f"{what} kept the host waiting {format_seconds(found.host_s)}: {fix} lets it run on while they copy"
        + ("" if pinned_gb_per_s else " (pinned bandwidth not measured: the low end of the gain is 0)")
    )
    return CopyAdvice(change, (low, found.host_s), message)
