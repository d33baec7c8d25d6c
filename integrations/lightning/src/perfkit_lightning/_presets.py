"""Our first users' two callbacks, kept working as presets of ``PerfMonitor``.

Same constructor arguments, same metric keys, same console blocks; the
numbers underneath are PerfMonitor's (exact data wait from the loaders, worker
records, the resource sampler), and the run directory is written as usual.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from lightning.pytorch import Trainer

import perfkit

from ._monitor import PerfMonitor, _log_step

_MB = 1024 * 1024


def _check_interval(log_interval: int) -> int:
    if isinstance(log_interval, bool) or not isinstance(log_interval, int) or log_interval < 1:
        raise ValueError(f"log_interval must be an int >= 1, got {log_interval!r}")
    return log_interval


class PerformanceProfilerCallback(PerfMonitor):
    """Validation timing and memory under ``performance/...`` keys.

    Every ``log_interval`` validation batches: ``performance/val_batch_time`` (s) and
    ``performance/val_batch_idx``. Each validation epoch: ``performance/val_epoch_time`` (s),
    ``performance/val_batch_{mean,median,p95,p99,std}`` (s), ``performance/val_num_batches``,
    ``performance/cpu_memory_percent`` (system memory, the window's peak) and, with CUDA,
    ``performance/gpu_memory_gb`` / ``performance/gpu_memory_reserved_gb`` (allocator peaks).
    ``verbose`` prints a validation summary on rank 0.
    """

    def __init__(
        self, enabled: bool = True, log_interval: int = 10, profile_memory: bool = True, verbose: bool = False
    ) -> None:
        # Presets log their own keys; the run directory is PerfMonitor's to write.
        super().__init__(
            enabled=enabled, phases=("val",), sample_resources=profile_memory, top_k_slowest=0, save_run=False
        )
        self.log_interval = _check_interval(log_interval)
        self.profile_memory = profile_memory
        self.verbose = verbose

    def _batch_end(self, phase: str, batch: Any, batch_idx: int, trainer: Trainer) -> int | None:
        duration_ns = super()._batch_end(phase, batch, batch_idx, trainer)
        if (
            duration_ns is not None
            and phase == "val"
            and batch_idx % self.log_interval == 0
            and trainer.is_global_zero
        ):
            metrics = {
                "performance/val_batch_time": duration_ns / 1e9,
                "performance/val_batch_idx": float(batch_idx),
            }
            self.log_to_loggers(trainer, metrics, _log_step(trainer, "val"))
        return duration_ns

    def _emit(self, trainer: Trainer, window: perfkit.PhaseWindow, metrics: Mapping[str, float]) -> None:
        snap = window.snapshot
        out: dict[str, float] = {
            "performance/val_epoch_time": window.wall_s,
            "performance/val_num_batches": float(metrics.get("perf/val/steps", 0.0)),
        }
        step = snap.get(perfkit.step_series("val"))
        if step is not None:
            for key, value in (
                ("mean", step.mean_s),
                ("median", step.median_s),
                ("p95", step.p95_s),
                ("p99", step.p99_s),
                ("std", step.std_s),
            ):
                out[f"performance/val_batch_{key}"] = value
        if self.profile_memory:
            out.update(_memory_keys(snap))
        self.log_to_loggers(trainer, out, _log_step(trainer, "val"))
        if self.verbose:
            print(_validation_summary(window, out), flush=True)


def _memory_keys(snap: perfkit.Snapshot) -> dict[str, float]:
    out: dict[str, float] = {}
    system = snap.gauges.get("system.memory_percent")
    if system is not None:
        out["performance/cpu_memory_percent"] = system.max
    peak = [g.max for name, g in snap.gauges.items() if name.endswith(".peak_allocated_mb")]
    reserved = [g.max for name, g in snap.gauges.items() if name.endswith(".reserved_mb")]
    if peak:  # only where torch.cuda runs
        out["performance/gpu_memory_gb"] = max(peak) / 1024
    if reserved:
        out["performance/gpu_memory_reserved_gb"] = max(reserved) / 1024
    return out


def _validation_summary(window: perfkit.PhaseWindow, out: Mapping[str, float]) -> str:
    n = int(out["performance/val_num_batches"])
    seconds = out["performance/val_epoch_time"]
    text = f"[Performance] Validation epoch {window.epoch}: {n} batches in {seconds:.3f} s"
    if "performance/val_batch_mean" in out:
        text += "; batch " + ", ".join(
            f"{k} {out[f'performance/val_batch_{k}']:.4f} s" for k in ("mean", "median", "p95", "p99")
        )
    if "performance/gpu_memory_gb" in out:
        text += f"; GPU memory {out['performance/gpu_memory_gb']:.2f} GB"
    if "performance/cpu_memory_percent" in out:
        text += f"; CPU memory {out['performance/cpu_memory_percent']:.1f}%"
    return text


class ThroughputMonitorCallback(PerfMonitor):
    """Training throughput every ``log_interval`` epochs, printed as ``[Throughput] Epoch N: ...``.

    Keys: ``samples_per_second``, ``batches_per_second``; with ``track_timing``
    ``batch_load_time_ms_{avg,p50,p95,p99}`` (how long the loop waited for each batch),
    ``batch_transform_time_ms_{avg,p50,p95,p99}`` (the time spent making each batch: in the
    DataLoader workers when there are some, else inside the wait itself) and
    ``throughput_efficiency`` (compute time / (compute + wait): 1.0 means the loop never
    waited for data); with ``track_memory`` ``memory_peak_mb`` (this process's RSS peak in the
    epoch) and ``memory_NAME_mb`` for each of ``memory_probes`` (name -> callable returning
    bytes; ``dataset`` and ``cache`` give ``memory_dataset_mb`` and ``memory_cache_mb``).
    """

    def __init__(
        self,
        enabled: bool = True,
        log_interval: int = 1,
        track_memory: bool = True,
        track_timing: bool = True,
        memory_probes: Mapping[str, Callable[[], int]] | None = None,
    ) -> None:
        super().__init__(
            enabled=enabled, phases=("train",), sample_resources=track_memory, top_k_slowest=0, save_run=False
        )
        self.log_interval = _check_interval(log_interval)
        self.track_memory = track_memory
        self.track_timing = track_timing
        probes = dict(memory_probes or {})
        for name, probe in probes.items():
            if not callable(probe):
                raise TypeError(f"memory_probes[{name!r}] must be a callable returning bytes, got {probe!r}")
        self.memory_probes = probes

    def _emit(self, trainer: Trainer, window: perfkit.PhaseWindow, metrics: Mapping[str, float]) -> None:
        if window.epoch % self.log_interval:
            return
        snap = window.snapshot
        out: dict[str, float] = {}
        if window.wall_s > 0:
            if window.samples:
                out["samples_per_second"] = window.samples / window.wall_s
            out["batches_per_second"] = metrics.get("perf/train/batches_per_s", 0.0)
        if self.track_timing:
            out.update(self._timing(snap))
        if self.track_memory:
            out.update(self._memory(snap))
        self.log_to_loggers(trainer, out, _log_step(trainer, "train"))
        print(_throughput_block(window.epoch, out), flush=True)

    def _timing(self, snap: perfkit.Snapshot) -> dict[str, float]:
        out: dict[str, float] = {}
        data = perfkit.data_series("train")
        wait, fetch = snap.get(data + ".wait"), snap.get(data + ".fetch")
        for key, stats in (("batch_load_time_ms", wait), ("batch_transform_time_ms", fetch or wait)):
            if stats is not None:
                out.update(
                    {
                        f"{key}_avg": stats.mean_s * 1e3,
                        f"{key}_p50": stats.median_s * 1e3,
                        f"{key}_p95": stats.p95_s * 1e3,
                        f"{key}_p99": stats.p99_s * 1e3,
                    }
                )
        step = snap.get(perfkit.step_series("train"))
        if step is not None:
            waited = wait.total_s if wait is not None else 0.0
            busy = step.total_s + waited
            out["throughput_efficiency"] = step.total_s / busy if busy > 0 else 1.0
        return out

    def _memory(self, snap: perfkit.Snapshot) -> dict[str, float]:
        out: dict[str, float] = {}
        rss = snap.gauges.get("process.rss_mb")
        if rss is not None:
            out["memory_peak_mb"] = rss.max
        for name, probe in self.memory_probes.items():
            try:
                out[perfkit.metric_key(f"memory_{name}_mb")] = probe() / _MB
            except Exception as exc:  # a probe must not stop training
                self._warn(f"probe:{name}", f"perfkit: memory probe {name!r} raised {exc!r}; left out")
        return out


def _throughput_block(epoch: int, out: Mapping[str, float]) -> str:
    parts = [f"[Throughput] Epoch {epoch}:"]
    if "samples_per_second" in out:
        parts.append(f"{out['samples_per_second']:.1f} samples/s,")
    parts.append(f"{out.get('batches_per_second', 0.0):.2f} batches/s")
    if "batch_load_time_ms_avg" in out:
        parts.append(
            f"| load {out['batch_load_time_ms_avg']:.1f} ms (p95 {out['batch_load_time_ms_p95']:.1f})"
        )
    if "batch_transform_time_ms_avg" in out:
        parts.append(f"| transform {out['batch_transform_time_ms_avg']:.1f} ms")
    if "throughput_efficiency" in out:
        parts.append(f"| efficiency {out['throughput_efficiency']:.1%}")
    memory = [f"{k[7:-3]} {v:.0f} MB" for k, v in out.items() if k.startswith("memory_")]
    if memory:
        parts.append("| memory " + ", ".join(memory))
    return " ".join(parts)
