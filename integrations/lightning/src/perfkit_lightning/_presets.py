"""Our first users' two callbacks, kept working as key mappers over the stage timeline.

Same constructor arguments, same metric keys, same console blocks; the numbers underneath
are the driver's (exact data wait from the loaders, worker records, the resource sampler),
recorded once however many callbacks are stacked on the Trainer. A preset writes no run
directory (PerfMonitor does).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from lightning.pytorch import LightningModule, Trainer

from perfkit import Snapshot
from perfkit.checks import check_int
from perfkit.names import fetch_series, step_series, wait_series
from perfkit.reports import performance_line, throughput_line
from perfkit.sinks import SinkFanout
from perfkit.stages import StageWindow, metric_key, stage_metrics

from ._base import PerfkitCallback
from ._console import say
from ._driver import Driver
from ._lightning import log_step
from ._sinks import log_to_loggers

_MB = 1024 * 1024


class _Preset(PerfkitCallback):
    """A preset: its own keys to every logger of the Trainer, nothing else."""

    _fanout: SinkFanout | None = None
    _trainer: Trainer | None = None

    def joined(self, trainer: Trainer, pl_module: LightningModule, driver: Driver) -> None:
        self._trainer = trainer
        self._fanout = SinkFanout(driver.logger_sinks())

    def leaving(self, trainer: Trainer, driver: Driver, *, failed: bool) -> None:
        self._fanout = None
        self._trainer = None

    def _rank_zero(self) -> Trainer | None:
        trainer = self._trainer
        return (
            trainer if trainer is not None and trainer.is_global_zero and self._fanout is not None else None
        )


class PerformanceProfilerCallback(_Preset):
    """Validation timing and memory under ``performance/...`` keys.

    Every ``log_interval`` validation batches: ``performance/val_batch_time`` (s) and
    ``performance/val_batch_idx``. Each validation epoch: ``performance/val_epoch_time`` (s),
    ``performance/val_batch_{mean,median,p95,p99,std}`` (s), ``performance/val_num_batches``,
    ``performance/cpu_memory_percent`` (system memory, the window's peak) and, with CUDA,
    ``performance/gpu_memory_gb`` / ``performance/gpu_memory_reserved_gb`` (allocator peaks).
    ``verbose`` logs a validation summary on rank 0.
    """

    def __init__(
        self, enabled: bool = True, log_interval: int = 10, profile_memory: bool = True, verbose: bool = False
    ) -> None:
        self.enabled = bool(enabled)
        self.log_interval = check_int(log_interval, "log_interval", low=1)
        self.profile_memory = profile_memory
        self.verbose = verbose
        self._logged_batches = 0

    def wants_resources(self) -> bool:
        return bool(self.profile_memory)

    def step_ended(self, stage: str, index: int, duration_ns: int) -> None:
        if stage != "val" or index % self.log_interval or self._rank_zero() is None:
            return
        assert self._fanout is not None
        metrics = {"performance/val_batch_time": duration_ns / 1e9, "performance/val_batch_idx": float(index)}
        # Per-batch rows at their own step (the validation batches logged so far), not stacked at one.
        log_to_loggers(self._fanout, metrics, self._logged_batches)
        self._logged_batches += 1

    def stage_ended(self, window: StageWindow) -> None:
        trainer = self._rank_zero()
        if window.stage != "val" or trainer is None:
            return
        assert self._fanout is not None
        snap = window.snapshot
        step = snap.get(step_series("val"))
        out: dict[str, float] = {
            "performance/val_epoch_time": window.wall_s,
            "performance/val_num_batches": float(step.count if step is not None else 0),
        }
        if step is not None:
            for key in ("mean", "median", "p95", "p99", "std"):
                out[f"performance/val_batch_{key}"] = getattr(step, f"{key}_s")
        if self.profile_memory:
            out.update(_memory_keys(snap))
        self._fanout.emit(window, out, log_step(trainer, "val"))
        if self.verbose:
            say(performance_line(window, out))


def _memory_keys(snap: Snapshot) -> dict[str, float]:
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


class ThroughputMonitorCallback(_Preset):
    """Training throughput every ``log_interval`` epochs, logged as ``[Throughput] Epoch N: ...``.

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
        self.enabled = bool(enabled)
        self.log_interval = check_int(log_interval, "log_interval", low=1)
        self.track_memory = track_memory
        self.track_timing = track_timing
        if memory_probes is not None and not isinstance(memory_probes, Mapping):
            raise TypeError(
                f"memory_probes must be a mapping of name -> callable returning bytes, got {memory_probes!r}"
            )
        probes = dict(memory_probes or {})
        for name, probe in probes.items():
            if not callable(probe):
                raise TypeError(f"memory_probes[{name!r}] must be a callable returning bytes, got {probe!r}")
        self.memory_probes = probes

    def wants_resources(self) -> bool:
        return bool(self.track_memory)

    def stage_ended(self, window: StageWindow) -> None:
        trainer = self._rank_zero()
        if window.stage != "train" or window.epoch % self.log_interval or trainer is None:
            return
        assert self._fanout is not None
        snap = window.snapshot
        out: dict[str, float] = {}
        if window.wall_s > 0:
            if window.samples:
                out["samples_per_second"] = window.samples / window.wall_s
            out["batches_per_second"] = stage_metrics(window, user_series=False).get(
                "perf/train/batches_per_s", 0.0
            )
        if self.track_timing:
            out.update(self._timing(snap))
        if self.track_memory:
            out.update(self._memory(snap))
        self._fanout.emit(window, out, log_step(trainer, "train"))
        say(throughput_line(window.epoch, out))

    def _timing(self, snap: Snapshot) -> dict[str, float]:
        out: dict[str, float] = {}
        wait, fetch = snap.get(wait_series("train")), snap.get(fetch_series("train"))
        for key, stats in (("batch_load_time_ms", wait), ("batch_transform_time_ms", fetch or wait)):
            if stats is not None:
                for name, stat in (("avg", "mean"), ("p50", "median"), ("p95", "p95"), ("p99", "p99")):
                    out[f"{key}_{name}"] = getattr(stats, f"{stat}_s") * 1e3
        step = snap.get(step_series("train"))
        if step is not None:
            waited = wait.total_s if wait is not None else 0.0
            busy = step.total_s + waited
            out["throughput_efficiency"] = step.total_s / busy if busy > 0 else 1.0
        return out

    def _memory(self, snap: Snapshot) -> dict[str, float]:
        out: dict[str, float] = {}
        rss = snap.gauges.get("process.rss_mb")
        if rss is not None:
            out["memory_peak_mb"] = rss.max
        for name, probe in self.memory_probes.items():
            try:
                out[metric_key(f"memory_{name}_mb")] = probe() / _MB
            except Exception as exc:  # a probe must not stop training
                if self._fanout is not None:  # warned once, counted, left out
                    message = f"perfkit: memory probe {name!r} raised {exc!r}; left out (said once)"
                    self._fanout.record_failure(f"memory probe {name!r}", "call", exc, message=message)
        return out
