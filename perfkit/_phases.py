"""Per-phase metrics: what a training loop logs at the end of each epoch of each phase.

A *phase* (train, val, test, predict) records, under names derived from it:
``PHASE.step`` (the compute of each batch), ``PHASE.data.wait`` (the wait for
each batch) and, with DataLoader workers, ``PHASE.data.fetch`` (each batch's
time in its worker). From one window of those, plus the phase's wall time and
sample count, this module computes flat ``{key: float}`` metrics whose keys
carry their unit (``perf/val/step_ms_p95``). No framework is imported: the
Lightning callback and a plain script get the same numbers.
"""

from __future__ import annotations

import heapq
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ._loops import worker_count, workers_needed
from ._snapshot import Snapshot
from ._stats import Stats

_KEY_UNSAFE = re.compile(r"[^A-Za-z0-9_/. -]")  # what MLflow accepts in a metric key


def step_series(phase: str) -> str:
    return f"{phase}.step"


def data_series(phase: str) -> str:
    """The name a phase's loader is instrumented with; its waits are ``.wait``, worker time ``.fetch``."""
    return f"{phase}.data"


@dataclass(frozen=True)
class SlowStep:
    """One of the slowest steps of a phase, with the user's tags for that batch."""

    phase: str
    epoch: int
    batch_idx: int
    rank: int
    duration_s: float
    tags: Mapping[str, float] = field(default_factory=dict)


def keep_slowest(heap: list[Any], entry: tuple[Any, ...], k: int) -> None:
    """Keep in ``heap`` the ``k`` largest entries seen (entries compare by their first item)."""
    if len(heap) < k:
        heapq.heappush(heap, entry)
    elif entry[0] > heap[0][0]:
        heapq.heapreplace(heap, entry)


@dataclass(frozen=True)
class PhaseWindow:
    """One epoch of one phase: its snapshot (merged over ranks), wall time and samples.

    ``rank_step_means_s`` holds each rank's mean step time when several ranks took part;
    ``data`` names the loader series when it is not the phase's own (``data_series(phase)``).
    """

    phase: str
    epoch: int
    snapshot: Snapshot
    wall_s: float
    samples: int | None = None
    rank_step_means_s: tuple[float, ...] = ()
    slowest: tuple[SlowStep, ...] = ()
    data: str | None = None

    @property
    def s_per_sample(self) -> float | None:
        return self.wall_s / self.samples if self.samples else None


_MEMORY = {  # gauge (by suffix) -> metric, each the peak over the window
    ".memory_used_mb": "memory_used_peak_mb",
    ".peak_allocated_mb": "allocator_peak_mb",
    ".reserved_mb": "allocator_reserved_peak_mb",
    "process.rss_mb": "process_rss_peak_mb",
    "workers.rss_mb": "workers_rss_peak_mb",
    "system.memory_percent": "system_memory_peak_percent",
}


def metric_key(*parts: str) -> str:
    """Join parts with '/' and replace what loggers would silently drop (MLflow keeps [A-Za-z0-9_/. -])."""
    return _KEY_UNSAFE.sub("_", "/".join(parts))


def phase_metrics(
    window: PhaseWindow,
    *,
    prefix: str = "perf",
    reference_s_per_sample: float | None = None,
    user_series: bool = True,
) -> dict[str, float]:
    """Flat metrics of one phase epoch; ``reference_s_per_sample`` (training's) gives the ratio to it.

    >>> import perfkit
    >>> reg = perfkit.Registry()
    >>> t0 = reg.clock(); reg.record("val.step", t0, t0 + 5_000_000)
    >>> w = perfkit.PhaseWindow("val", 0, reg.snapshot(), wall_s=0.01, samples=4)
    >>> perfkit.phase_metrics(w)["perf/val/step_ms_mean"]
    5.0
    """
    snap, p = window.snapshot, metric_key(prefix, window.phase)
    out: dict[str, float] = {f"{p}/epoch_s": window.wall_s}
    step = snap.get(step_series(window.phase))
    if step is not None:
        out.update(_timing(f"{p}/step", step))
        out[f"{p}/steps"] = float(step.count)
        if window.wall_s > 0:
            out[f"{p}/batches_per_s"] = step.count / window.wall_s
    out.update(_data(snap, window, p, step))
    if window.samples and window.wall_s > 0:
        out[f"{p}/samples"] = float(window.samples)
        out[f"{p}/samples_per_s"] = window.samples / window.wall_s
        spp = window.s_per_sample
        if reference_s_per_sample and spp is not None:
            out[f"{p}/time_per_sample_vs_train_ratio"] = spp / reference_s_per_sample
    out.update(_memory(snap, p))
    out.update(_ranks(window, p))
    if window.slowest:
        out[f"{p}/slowest_step_ms"] = max(s.duration_s for s in window.slowest) * 1e3
    if user_series:
        out.update(_user_series(snap, p))
    return out


def _timing(key: str, s: Stats) -> dict[str, float]:
    return {
        f"{key}_ms_mean": s.mean_s * 1e3,
        f"{key}_ms_median": s.median_s * 1e3,
        f"{key}_ms_p95": s.p95_s * 1e3,
        f"{key}_ms_p99": s.p99_s * 1e3,
        f"{key}_ms_max": s.max_s * 1e3,
        f"{key}_ms_std": s.std_s * 1e3,
    }


def _data(snap: Snapshot, window: PhaseWindow, p: str, step: Stats | None) -> dict[str, float]:
    out: dict[str, float] = {}
    data = window.data or data_series(window.phase)
    wait = snap.get(data + ".wait")
    if wait is not None:
        out[f"{p}/data_wait_ms_mean"] = wait.mean_s * 1e3
        out[f"{p}/data_wait_ms_p95"] = wait.p95_s * 1e3
        out[f"{p}/data_wait_s_total"] = wait.total_s
        if window.wall_s > 0:
            out[f"{p}/data_wait_fraction"] = min(1.0, wait.total_s / window.wall_s)
    fetch = snap.get(data + ".fetch")
    if fetch is not None:
        out[f"{p}/worker_batch_ms_mean"] = fetch.mean_s * 1e3
        out[f"{p}/worker_batch_ms_p95"] = fetch.p95_s * 1e3
        out[f"{p}/workers"] = float(worker_count(snap, data + ".fetch"))
        needed = workers_needed(fetch.mean_s, step.mean_s) if step is not None else None
        if needed is not None:
            out[f"{p}/workers_needed"] = float(needed)
    return out


def _memory(snap: Snapshot, p: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for gauge, g in snap.gauges.items():
        for suffix, metric in _MEMORY.items():
            if gauge.endswith(suffix):
                device = gauge[: -len(suffix)]
                key = f"{p}/{device}_{metric}" if device else f"{p}/{metric}"
                out[metric_key(key)] = g.max
    return out


def _ranks(window: PhaseWindow, p: str) -> dict[str, float]:
    means = window.rank_step_means_s
    ran = [rank for rank, mean in enumerate(means) if not math.isnan(mean)]  # NaN: no step on that rank
    if len(means) < 2 or not ran:
        return {}
    slowest = max(ran, key=means.__getitem__)
    return {
        f"{p}/ranks": float(len(means)),
        f"{p}/slowest_rank": float(slowest),
        f"{p}/step_ms_mean_slowest_rank": means[slowest] * 1e3,
        f"{p}/step_ms_mean_rank_spread": (means[slowest] - min(means[r] for r in ran)) * 1e3,
    }


def _user_series(snap: Snapshot, p: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for name in snap:
        if name in _OWN:
            continue
        s = snap[name]
        key = metric_key(p, "series", name)
        out[f"{key}/count"] = float(s.count)
        out[f"{key}/total_ms"] = s.total_s * 1e3
        out[f"{key}/mean_ms"] = s.mean_s * 1e3
        out[f"{key}/p95_ms"] = s.p95_s * 1e3
    return out


_OWN = frozenset(
    name
    for ph in ("train", "val", "test", "predict")
    for name in (step_series(ph), data_series(ph) + ".wait", data_series(ph) + ".fetch")
)
