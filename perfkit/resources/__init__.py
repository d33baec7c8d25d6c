"""Memory and utilisation over time: a background sampler and the sources it polls.

    with ResourceSampler(interval_s=0.1):        # NVML, this process and its children, torch.cuda
        train()

Each source is optional and skipped, with the reason, where it cannot run.

The device's FLOPs are here too: ``device_peak`` (a dense peak by device name and dtype, from
NVIDIA's datasheets, or abstaining with the reason), ``mixed_peak`` (the peak of a step whose
matmuls run in several dtypes) and ``mfu`` / ``step_mfu`` (the model's FLOP/s against that peak).
"""

from .._mfu import Mfu, mfu, mixed_peak, step_mfu
from .._peaks import PEAKS, DevicePeak, Peak, device_peak
from ._lease import lease, release
from ._sampler import MAX_INTERVAL_S, ResourceSampler
from ._sources import NvmlSource, ProcessSource, Source, SourceUnavailable, TorchCudaSource, default_sources

__all__ = [
    "MAX_INTERVAL_S",
    "PEAKS",
    "DevicePeak",
    "Mfu",
    "NvmlSource",
    "Peak",
    "ProcessSource",
    "ResourceSampler",
    "Source",
    "SourceUnavailable",
    "TorchCudaSource",
    "default_sources",
    "device_peak",
    "lease",
    "mfu",
    "mixed_peak",
    "release",
    "step_mfu",
]
