"""Memory and utilisation over time: a background sampler and the sources it polls.

    with ResourceSampler(interval_s=0.1):        # NVML, this process and its children, torch.cuda
        train()

Each source is optional and skipped, with the reason, where it cannot run.
"""

from ._lease import lease, release
from ._sampler import MAX_INTERVAL_S, ResourceSampler
from ._sources import NvmlSource, ProcessSource, Source, SourceUnavailable, TorchCudaSource, default_sources

__all__ = [
    "MAX_INTERVAL_S",
    "NvmlSource",
    "ProcessSource",
    "ResourceSampler",
    "Source",
    "SourceUnavailable",
    "TorchCudaSource",
    "default_sources",
    "lease",
    "release",
]
