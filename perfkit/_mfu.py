"""MFU: the model's FLOPs per second as a fraction of the device's dense peak, or why it is unknown.

    MFU = flops_per_step * steps / seconds / peak

``flops_per_step`` is counted once on a real step (``perfkit.torch.count_flops``: torch's
``FlopCounterMode``, split by the dtype each matmul ran in) or stated by the user; the peak comes
from the device table (``_peaks``) or ``peak_tflops=``. ``seconds`` is what the MFU is *of*: the
steps' own time (the series ``STAGE.step``) says how well the steps use the device, a stage
epoch's wall time how well the whole loop does (data waits included). A step whose matmuls run
in several dtypes is judged against their combined peak: the time the mix would take at each
dtype's peak (``mixed_peak``). Nothing is guessed: without a count, a peak or a timed step, the
result abstains with the reason in words.

>>> peak = device_peak("NVIDIA H100 80GB HBM3", "bf16")
>>> m = mfu(4.0e12, steps=100, seconds=1.0, peak=peak)
>>> round(m.fraction, 3), m.line
(0.404, '40% MFU: 400 of 990 TFLOP/s (bf16, H100 SXM)')
>>> mfu(None, steps=100, seconds=1.0, peak=peak).line
'MFU unknown: no FLOPs per step (count them with perfkit.torch.count_flops, or pass flops_per_step=)'
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from ._peaks import PEAKS, DevicePeak, Peak, check_peak_tflops, device_peak
from ._snapshot import Snapshot
from .names import step_series

UNKNOWN_SHARE = 0.01
"""A dtype the table has no peak for may carry up to this share of a step's FLOPs (an fp64 loss, an
int8 lookup) before the combined peak abstains: below it, it cannot move MFU by a point."""


@dataclass(frozen=True)
class Mfu:
    """The MFU of some steps (``fraction``, 0.38 for 38%) against ``peak``, or ``reason`` it is None."""

    fraction: float | None
    achieved_tflops: float | None
    peak: Peak | None
    reason: str = ""

    @property
    def line(self) -> str:
        """One line for a summary: the MFU, what was achieved, the peak and where it comes from."""
        if self.fraction is None or self.peak is None or self.peak.tflops is None:
            return f"MFU unknown: {self.reason}"
        where = self.peak.device or "stated"
        return (
            f"{self.fraction:.0%} MFU: {self.achieved_tflops:.3g} of {self.peak.tflops:.3g} TFLOP/s "
            f"({self.peak.dtype}, {where})"
        )


def mfu(flops_per_step: float | None, *, steps: int, seconds: float, peak: Peak | float | None) -> Mfu:
    """The MFU of ``steps`` steps of ``flops_per_step`` FLOPs each that took ``seconds``, against
    ``peak`` (a ``Peak``, or a stated peak in TFLOP/s).

    >>> mfu(2e12, steps=10, seconds=2.0, peak=20.0).fraction
    0.5
    >>> mfu(2e12, steps=10, seconds=2.0, peak=None).reason
    'no peak for this device and dtype: pass peak_tflops='
    """
    if peak is not None and not isinstance(peak, Peak):
        peak = Peak(check_peak_tflops(peak), "stated", None, "stated by the user (peak_tflops=)")
    if flops_per_step is None or not math.isfinite(flops_per_step) or flops_per_step <= 0:
        why = "no FLOPs per step (count them with perfkit.torch.count_flops, or pass flops_per_step=)"
        return Mfu(None, None, peak, why)
    if steps <= 0 or not math.isfinite(seconds) or seconds <= 0:
        return Mfu(None, None, peak, "no step was timed")
    achieved = flops_per_step * steps / seconds / 1e12
    if peak is None or peak.tflops is None:
        reason = peak.reason if peak is not None else "no peak for this device and dtype: pass peak_tflops="
        return Mfu(None, achieved, peak, reason)
    return Mfu(achieved / peak.tflops, achieved, peak)


def mixed_peak(
    flops_by_dtype: Mapping[str, float],
    device_name: str | None,
    *,
    peak_tflops: float | None = None,
    table: tuple[DevicePeak, ...] = PEAKS,
) -> Peak:
    """The dense peak a step achieves at best when its FLOPs run in several dtypes: the total over
    the time each dtype's share would take at that dtype's peak (a harmonic mean, weighed by FLOPs).
    ``peak_tflops`` stated by the user wins. A dtype without a peak abstains the whole, unless it
    carries less than ``UNKNOWN_SHARE`` of the FLOPs (then it is left out, and ``notes`` say so).

    >>> p = mixed_peak({"bf16": 9e12, "fp32": 1e12}, "NVIDIA A100-SXM4-40GB")
    >>> round(p.tflops, 1), p.dtype
    (124.8, 'bf16 90% + fp32 10%')
    """
    total = float(sum(flops_by_dtype.values()))
    if peak_tflops is not None or total <= 0 or len(flops_by_dtype) == 1:
        dtype = max(flops_by_dtype, key=lambda d: flops_by_dtype[d]) if flops_by_dtype else "bf16"
        return device_peak(device_name, dtype, peak_tflops=peak_tflops, table=table)
    seconds = 0.0
    counted = 0.0
    notes: list[str] = []
    parts: list[str] = []
    device: str | None = device_name
    source = ""
    for dtype, flops in sorted(flops_by_dtype.items(), key=lambda kv: -kv[1]):
        peak = device_peak(device_name, dtype, table=table)
        share = flops / total
        if peak.tflops is None:
            if share >= UNKNOWN_SHARE:
                why = f"{share:.0%} of the FLOPs run in {dtype}: {peak.reason}"
                return Peak(None, dtype, peak.device, peak.source, why)
            notes.append(f"{share:.1%} of the FLOPs in {dtype} (no peak) left out")
            continue
        seconds += flops / peak.tflops
        counted += flops
        parts.append(f"{peak.dtype} {share:.0%}")
        device, source = peak.device, peak.source
        notes += peak.notes
    return Peak(counted / seconds, " + ".join(parts), device, source, notes=tuple(notes))


def step_mfu(snapshot: Snapshot, stage: str, flops_per_step: float | None, peak: Peak | float | None) -> Mfu:
    """The MFU of a window's steps of ``stage``: its ``STAGE.step`` records, counted and summed, in
    ``snapshot`` (a stage epoch's, or an interval's: MFU per stage and per interval alike).

    >>> import perfkit
    >>> reg = perfkit.Registry()
    >>> reg.record("train.step", 0, 500_000_000); reg.record("train.step", 0, 500_000_000)
    >>> step_mfu(reg.snapshot(), "train", 5e12, peak=20.0).fraction
    0.5
    """
    name = step_series(stage)
    stats = snapshot.get(name)
    if stats is None or stats.count == 0:
        return mfu(flops_per_step, steps=0, seconds=0.0, peak=peak)
    return mfu(flops_per_step, steps=stats.count, seconds=stats.total_s, peak=peak)
