"""Device activity inside the steps: how busy, why idle, copies' bandwidth, communication overlap.

Every device activity counts as busy time: kernels, copies, fills, MTIA's and other
accelerators' events, including work with no CPU launch in the trace (launched before
profiling started: it still ran). The idle gaps of each stream are split as Holistic Trace
Analysis does: *host wait* when the next activity was launched only after the gap began (the
CPU was late), *kernel wait* when it was launched in time and the gap is shorter than
``KERNEL_WAIT_US`` (launch overhead), *other* otherwise (synchronisation, an event from another
stream, communication).

    >>> KERNEL_WAIT_US
    30.0
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ._columns import Window, inside, merge, window_time
from ._results import CommOverlap, KernelStat, StreamIdle, TransferStat
from ._tables import KERNEL, KINDS, MEMCPY, MEMSET, TraceTables

KERNEL_WAIT_US = 30.0  # HTA's consecutive_kernel_delay
ALL_STREAMS = "all streams"


class DeviceColumns:
    """The device activity of a trace as numpy columns, with each activity's launch time (NaN: none)."""

    def __init__(self, tables: TraceTables) -> None:
        self.start, dur, code = tables.device.columns()
        self.end = self.start + dur
        self.kind = code % 4
        self.comm = (code // 4) % 2 == 1
        self.stream = code // 8
        self.launch = _launch_times(tables)
        self.stream_names = [
            f"device {p} stream {t.removeprefix('stream ').strip()}" for p, t in tables.streams
        ]

    def busy(self, windows: Sequence[Window], mask: np.ndarray | None = None) -> float:
        """µs of the windows during which some activity (of ``mask``) runs."""
        start, end = (self.start, self.end) if mask is None else (self.start[mask], self.end[mask])
        return inside(*merge(start, end), windows)


def _launch_times(tables: TraceTables) -> np.ndarray:
    corr = np.frombuffer(tables.correlation, np.int64)
    out = np.full(len(corr), np.nan)
    known_corr = np.frombuffer(tables.launches[0], np.int64)
    if not len(known_corr) or not len(corr):
        return out
    order = np.argsort(known_corr, kind="stable")
    keys, times = known_corr[order], np.frombuffer(tables.launches[1])[order]
    at = np.clip(np.searchsorted(keys, corr), 0, len(keys) - 1)
    found = (keys[at] == corr) & (corr >= 0)
    out[found] = times[at[found]]
    return out


def idle_breakdown(dev: DeviceColumns, windows: Sequence[Window]) -> tuple[StreamIdle, ...]:
    """The device's idle gaps (no stream busy) first, then each stream's, busiest stream first."""
    rows = [_idle(ALL_STREAMS, dev, np.ones(len(dev.start), dtype=bool), windows)]
    streams = [_idle(name, dev, dev.stream == i, windows) for i, name in enumerate(dev.stream_names)]
    return (*rows, *sorted(streams, key=lambda s: -s.busy_us))


def _idle(name: str, dev: DeviceColumns, mask: np.ndarray, windows: Sequence[Window]) -> StreamIdle:
    start, end, launch = dev.start[mask], dev.end[mask], dev.launch[mask]
    order = np.argsort(start, kind="stable")
    start, end, launch = start[order], end[order], launch[order]
    prev_end = np.maximum.accumulate(end)[:-1]  # what the gap before each activity started from
    start, launch = start[1:], launch[1:]
    gap = start - prev_end
    before = window_time(windows)
    clipped = np.where(gap > 0, before(start) - before(prev_end), 0.0)
    host = launch > prev_end  # NaN (no launch in the trace) compares False
    kernel = ~host & (gap < KERNEL_WAIT_US)
    busy = inside(*merge(dev.start[mask], dev.end[mask]), windows)
    return StreamIdle(
        name,
        busy,
        float(clipped[host].sum()),
        float(clipped[kernel].sum()),
        float(clipped[~host & ~kernel].sum()),
    )


def comm_overlap(dev: DeviceColumns, windows: Sequence[Window]) -> CommOverlap | None:
    """Communication kernels against compute kernels; None without communication kernels."""
    kernels = dev.kind == KERNEL
    comm, compute = kernels & dev.comm, kernels & ~dev.comm
    if not comm.any():
        return None
    comm_us, compute_us = dev.busy(windows, comm), dev.busy(windows, compute)
    overlap = max(0.0, comm_us + compute_us - dev.busy(windows, kernels))
    return CommOverlap(comm_us, compute_us, overlap, overlap / comm_us if comm_us > 0 else 0.0)


def kernel_stats(tables: TraceTables) -> list[KernelStat]:
    """Every device activity name, most time first; share of all device activity time."""
    all_us = sum(row[1] for row in tables.gpu.values())
    out = [
        KernelStat(name, KINDS[kind], int(row[0]), row[1], row[1] / all_us if all_us > 0 else 0.0)
        for (kind, name), row in tables.gpu.items()
    ]
    return sorted(out, key=lambda k: (-k.total_us, k.name))


def transfer_stats(tables: TraceTables) -> list[TransferStat]:
    """Copies and fills by name, most time first, with their bandwidth where bytes are known."""
    out = [
        TransferStat(
            name,
            KINDS[kind],
            int(count),
            total_us,
            int(size),
            size / sized_us / 1e3 if sized_us > 0 else None,  # bytes per µs / 1e3 = GB/s
        )
        for (kind, name), (count, total_us, size, sized_us) in tables.gpu.items()
        if kind in (MEMCPY, MEMSET)
    ]
    return sorted(out, key=lambda t: (-t.total_us, t.name))
