"""The console lines of the Lightning presets (our first users' two callbacks), from the keys they log.

    [Performance] Validation epoch 0: 4 batches in 0.123 s; batch mean 0.0100 s, ...; GPU memory 1.23 GB
    [Throughput] Epoch 2: 123.5 samples/s, 3.46 batches/s | load 1.2 ms (p95 2.3) | efficiency 87.6%

Their formats are the presets' own, kept as our first users' callbacks wrote them: a user's log
parser may read them.
"""

from __future__ import annotations

from collections.abc import Mapping

from ...stages import StageWindow


def performance_line(window: StageWindow, out: Mapping[str, float]) -> str:
    """The ``PerformanceProfilerCallback`` preset's validation summary, from its ``performance/...`` keys."""
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


def throughput_line(epoch: int, out: Mapping[str, float]) -> str:
    """The ``ThroughputMonitorCallback`` preset's line for a training epoch, from the keys it logs.

    >>> throughput_line(2, {"samples_per_second": 123.45, "batches_per_second": 3.456})
    '[Throughput] Epoch 2: 123.5 samples/s, 3.46 batches/s'
    """
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
