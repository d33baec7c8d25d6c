"""Per-stage metrics: what a training loop logs at the end of each epoch of each stage.

From one ``StageWindow`` this computes flat ``{key: float}`` metrics whose keys carry their
unit (``perf/val/step_ms_p95``, ``perf/train/time/data_wait_fraction``). No framework is
imported: the Lightning callback and a plain script get the same numbers, and the key of
every metric is built here.
"""

from __future__ import annotations

import math
import re

from .._device_facts import gpu_busy
from .._loader_names import loader_index
from .._mfu import mfu
from .._snapshot import Snapshot
from .._stats import Stats
from ..loaders import cores_for_workers, worker_count, workers_needed
from ..names import (
    ACCOUNT_OVERLAYS,
    CALLBACKS,
    CHECKPOINT,
    FLOPS_PER_STEP,
    LOGGERS,
    MODULE_HOOKS,
    PEAK_FLOPS,
    STEP_GPU,
    STEP_PART,
    SYNC_STALL,
    fetch_series,
    is_stage_series,
    optimizer_series,
    step_series,
    wait_series,
)
from ._account import PARTS
from ._comm import communication
from ._window import StageWindow

_KEY_UNSAFE = re.compile(r"[^A-Za-z0-9_/. -]")  # what MLflow accepts in a metric key

_MEMORY = {  # gauge (by suffix) -> metric, each the peak over the window
    ".memory_used_mb": "memory_used_peak_mb",
    ".peak_allocated_mb": "allocator_peak_mb",
    ".reserved_mb": "allocator_reserved_peak_mb",
    "process.rss_mb": "process_rss_peak_mb",
    "workers.rss_mb": "workers_rss_peak_mb",
    "workers.uss_mb": "workers_uss_peak_mb",
    "workers.pss_mb": "workers_pss_peak_mb",
    "system.memory_percent": "system_memory_peak_percent",
}


def metric_key(*parts: str) -> str:
    """Join parts with '/' and replace what loggers would silently drop (MLflow keeps [A-Za-z0-9_/. -]).

    >>> metric_key("perf", "val", "series", "pyclipper:unclip")
    'perf/val/series/pyclipper_unclip'
    """
    return _KEY_UNSAFE.sub("_", "/".join(parts))


def stage_prefix(stage: str, prefix: str = "perf") -> str:
    """The key prefix of a stage's metrics: ``perf/val``."""
    return metric_key(prefix, stage)


def stage_metrics(
    window: StageWindow, *, prefix: str = "perf", user_series: bool = True, cores: int | None = None
) -> dict[str, float]:
    """Flat metrics of one stage epoch. ``workers_needed`` and ``worker_cores`` are measurements
    (the workers whose batches would come as fast as the loop asks, each on a core of its own; the
    cores free for workers, ``cores`` or by default the cores this process may use less one for the
    loop), not advice: what more workers would do, within the cores and memory, is the INPUT_BOUND
    verdict's to say.

    >>> import perfkit
    >>> from perfkit.stages import Account, StageWindow
    >>> reg = perfkit.Registry()
    >>> t0 = reg.clock(); reg.record("val.step", t0, t0 + 5_000_000)
    >>> w = StageWindow("val", 0, reg.snapshot(), wall_s=0.01, account=Account.empty(0.01), samples=4)
    >>> stage_metrics(w)["perf/val/step_ms_mean"]
    5.0
    """
    snap, p = window.snapshot, stage_prefix(window.stage, prefix)
    out: dict[str, float] = {f"{p}/epoch": float(window.epoch), f"{p}/epoch_s": window.wall_s}
    step = snap.get(step_series(window.stage))
    if step is not None:
        out.update(_timing(f"{p}/step", step))
        out[f"{p}/steps"] = float(step.count)
        if window.wall_s > 0:
            out[f"{p}/batches_per_s"] = step.count / window.wall_s  # of the whole job, all ranks
    optimizer = snap.get(optimizer_series(window.stage))
    if optimizer is not None:  # steps are micro-batches; the optimizer stepped once per cycle
        out.update(_timing(f"{p}/optimizer_step", optimizer))
        out[f"{p}/optimizer_steps"] = float(optimizer.count)
    out.update(_account(window, p))
    out.update(_device(snap, p, step))
    out.update(_data(snap, window, p, step, cores or cores_for_workers()))
    if window.samples and window.wall_s > 0:
        out[f"{p}/samples"] = float(window.samples)
        out[f"{p}/samples_per_s"] = window.samples / window.wall_s
        spp = window.s_per_sample
        if window.reference_s_per_sample and spp is not None:
            out[f"{p}/time_per_sample_vs_train_ratio"] = spp / window.reference_s_per_sample
    if window.nested_s > 0:
        out[f"{p}/nested_stages_s"] = window.nested_s
    out.update(_memory(snap, p))
    out.update(_ranks(window, p))
    out.update(_communication(window, p))
    if window.slowest:
        out[f"{p}/slowest_step_ms"] = max(s.duration_s for s in window.slowest) * 1e3
    if user_series:
        out.update(_user_series(snap, p))
    return out


def _device(snap: Snapshot, p: str, step: Stats | None) -> dict[str, float]:
    """The GPU's account: its busy share (NVML), the host's time blocked on it, and the MFU where the
    step's FLOPs and the device's peak were recorded."""
    out: dict[str, float] = {}
    busy = gpu_busy(snap)
    if busy is not None:
        out[f"{p}/gpu_busy_fraction"] = busy
    stalls = [snap[n].total_s for n in snap if n.startswith(SYNC_STALL)]
    if stalls:
        out[f"{p}/sync_stall_s"] = sum(stalls)
    flops, peak = snap.gauges.get(FLOPS_PER_STEP), snap.gauges.get(PEAK_FLOPS)
    if flops is not None and peak is not None and step is not None and step.total_s > 0:
        found = mfu(flops.last, steps=step.count, seconds=step.total_s, peak=peak.last / 1e12)
        if found.fraction is not None:
            out[f"{p}/mfu_fraction"] = found.fraction
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


def _account(window: StageWindow, p: str) -> dict[str, float]:
    a = window.account
    out: dict[str, float] = {}
    for part in PARTS:
        out[f"{p}/time/{part}_s"] = a.seconds(part)
        out[f"{p}/time/{part}_fraction"] = a.fraction(part)
    for name, seconds in a.overlays.items():  # inside a part: ``perf/train/time/step/sync_wait_s``
        part = ACCOUNT_OVERLAYS.get(name, "overlay")
        out[metric_key(p, "time", part, f"{name}_s")] = seconds
        out[metric_key(p, "time", part, f"{name}_fraction")] = seconds / a.wall_s if a.wall_s > 0 else 0.0
    for subject, word in _SUBJECT_KEYS.items():  # a checkpoint callback is a callback in the keys too
        for name, seconds in a.subjects.get(subject, {}).items():
            out[metric_key(p, "time", word, f"{name}_s")] = seconds
    for name, seconds in a.subjects.get(STEP_PART, {}).items():  # the step's parts, as the parts are
        out[metric_key(p, "time", STEP_PART, f"{name}_fraction")] = (
            seconds / a.wall_s if a.wall_s > 0 else 0.0
        )
    return out


_SUBJECT_KEYS = {
    STEP_PART: "step",
    STEP_GPU: "step_gpu",
    CALLBACKS: "callback",
    CHECKPOINT: "callback",
    MODULE_HOOKS: "module_hook",
    LOGGERS: "logger",
}
"""The account's subjects logged one by one, and the word of their keys (``perf/train/time/logger/X_s``,
the step's parts ``perf/train/time/step/backward_s``, their GPU time
``perf/train/time/step_gpu/backward_s``)."""


def _data(snap: Snapshot, window: StageWindow, p: str, step: Stats | None, cores: int) -> dict[str, float]:
    out: dict[str, float] = {}
    loader = window.loader_name
    a = window.account
    wait = snap.get(wait_series(loader))
    if wait is not None:
        out[f"{p}/data_wait_ms_mean"] = wait.mean_s * 1e3
        out[f"{p}/data_wait_ms_p95"] = wait.p95_s * 1e3
    if wait is not None or a.seconds("data_wait") > 0:
        out[f"{p}/data_wait_s_total"] = a.seconds("data_wait")
        out[f"{p}/data_wait_fraction"] = min(1.0, a.fraction("data_wait"))
        boundary = a.subjects.get("data_wait", {})
        for subject, key in (("iter", "loader_iter"), ("first_batch", "first_batch")):
            if subject in boundary:
                out[f"{p}/{key}_s"] = boundary[subject]
                out[f"{p}/{key}_fraction"] = boundary[subject] / a.wall_s if a.wall_s > 0 else 0.0
    if a.loaders:  # several loaders: the stage's figure is theirs together, and each has its own
        out.pop(f"{p}/data_wait_ms_p95", None)  # no one p95 across loaders of different speeds
        out |= _loaders(snap, window, p)
    fetch = snap.get(fetch_series(loader))
    if fetch is not None:
        out[f"{p}/worker_batch_ms_mean"] = fetch.mean_s * 1e3
        out[f"{p}/worker_batch_ms_p95"] = fetch.p95_s * 1e3
        out[f"{p}/workers"] = float(worker_count(snap, fetch_series(loader)))
        loop_s = _loop_s_per_batch(window, step)
        needed = workers_needed(fetch.mean_s, loop_s) if loop_s is not None else None
        if needed is not None:
            out[f"{p}/workers_needed"] = float(needed)
            out[f"{p}/worker_cores"] = float(cores)
    return out


def _loaders(snap: Snapshot, window: StageWindow, p: str) -> dict[str, float]:
    """Each of a stage's several loaders: ``perf/val/loader/1/data_wait_fraction``, its wait per
    batch, the step time of its batches; the stage's wait per batch is over all their batches."""
    out: dict[str, float] = {}
    waits = [snap[wait_series(n)] for n in window.account.loaders if wait_series(n) in snap]
    if waits:
        out[f"{p}/data_wait_ms_mean"] = sum(w.total_s for w in waits) / sum(w.count for w in waits) * 1e3
    for name, sub in window.account.loaders.items():
        q = metric_key(p, "loader", str(loader_index(name, window.loader_name)))
        out[f"{q}/data_wait_s_total"] = sub.seconds("data_wait")
        out[f"{q}/data_wait_fraction"] = min(1.0, sub.fraction("data_wait"))
        out[f"{q}/step_s_total"] = sub.seconds("step")
        out[f"{q}/step_fraction"] = min(1.0, sub.fraction("step"))
        wait = snap.get(wait_series(name))
        if wait is not None:
            out[f"{q}/batches"] = float(wait.count)
            out[f"{q}/data_wait_ms_mean"] = wait.mean_s * 1e3
            out[f"{q}/data_wait_ms_p95"] = wait.p95_s * 1e3
    return out


def _loop_s_per_batch(window: StageWindow, step: Stats | None) -> float | None:
    """How often the main loop asks for a batch when it does not wait: everything but the wait."""
    if step is None or not step.count:
        return None
    a = window.account
    per_rank = step.count / max(1, len(window.ranks))
    return max(0.0, a.wall_s - a.seconds("data_wait")) / per_rank


def _memory(snap: Snapshot, p: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for gauge, g in snap.gauges.items():
        for suffix, metric in _MEMORY.items():
            if gauge.endswith(suffix):
                device = gauge[: -len(suffix)]
                key = f"{p}/{device}_{metric}" if device else f"{p}/{metric}"
                out[metric_key(key)] = g.max
    return out


def _ranks(window: StageWindow, p: str) -> dict[str, float]:
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


def _communication(window: StageWindow, p: str) -> dict[str, float]:
    """The exposed waits in collectives (``communication``): ``perf/train/communication/wait_fraction``,
    then by where they fell (``.../communication/forward/wait_s``) and by collective
    (``.../communication/all_gather/wait_s``, ``bytes_per_step``, ``calls_per_step``)."""
    c = communication(window)
    if c is None:
        return {}
    q = metric_key(p, "communication")
    out = {
        f"{q}/wait_s": c.wait_s,
        f"{q}/wait_fraction": c.share,
        f"{q}/bytes_per_step": sum(c.bytes_per_step.values()),
    }
    wall = c.wall_s if c.wall_s > 0 else math.inf
    for name, seconds in (*c.by_part.items(), *c.by_collective.items()):
        out[metric_key(q, name, "wait_s")] = seconds
        out[metric_key(q, name, "wait_fraction")] = seconds / wall
    for name, n in c.bytes_per_step.items():
        out[metric_key(q, name, "bytes_per_step")] = n
    for name, n in c.calls_per_step.items():
        out[metric_key(q, name, "calls_per_step")] = n
    return out


def _user_series(snap: Snapshot, p: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for name in snap:
        if is_stage_series(name):
            continue
        s = snap[name]
        key = metric_key(p, "series", name)
        out[f"{key}/count"] = float(s.count)
        out[f"{key}/total_ms"] = s.total_s * 1e3
        out[f"{key}/mean_ms"] = s.mean_s * 1e3
        out[f"{key}/p95_ms"] = s.p95_s * 1e3
    return out
