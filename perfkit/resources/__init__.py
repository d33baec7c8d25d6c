"""Memory and utilisation over time: a background sampler and the sources it polls.

    with ResourceSampler(interval_s=0.1):        # NVML, this process and its children, torch.cuda
        train()

Each source is optional and skipped, with the reason, where it cannot run.

The device's FLOPs are here too: ``device_peak`` (a dense peak by device name and dtype, from
NVIDIA's datasheets, or abstaining with the reason), ``mixed_peak`` (the peak of a step whose
matmuls run in several dtypes) and ``mfu`` / ``step_mfu`` (the model's FLOP/s against that peak).
What the device's timers left in a window is read back here too, for any window and without
torch: ``gpu_busy`` (NVML's busy share, where its samples cover 2 s), ``stall_sites``
(``perfkit.torch.watch_syncs``'s synchronizations by call site),
``copy_stats`` and ``copy_advice`` (``perfkit.torch.time_copy``'s copies, and what pinning gains).
"""

from .._device_facts import Copies, CopyAdvice, StallSite, copy_advice, copy_stats, gpu_busy, stall_sites
from .._mfu import Mfu, mfu, mixed_peak, step_mfu
from .._peaks import PEAKS, DevicePeak, Peak, device_peak
from ._lease import lease, release
from ._sampler import MAX_INTERVAL_S, ResourceSampler
from ._sources import NvmlSource, ProcessSource, Source, SourceUnavailable, TorchCudaSource, default_sources

__all__ = [
    "MAX_INTERVAL_S",
    "PEAKS",
    "Copies",
    "CopyAdvice",
    "DevicePeak",
    "Mfu",
    "NvmlSource",
    "Peak",
    "ProcessSource",
    "ResourceSampler",
    "Source",
    "SourceUnavailable",
    "StallSite",
    "TorchCudaSource",
    "copy_advice",
    "copy_stats",
    "default_sources",
    "device_peak",
    "gpu_busy",
    "lease",
    "mfu",
    "mixed_peak",
    "release",
    "stall_sites",
    "step_mfu",
]
