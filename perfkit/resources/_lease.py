"""One resource sampler per registry, however many callbacks ask for one.

Several consumers of one registry (a monitor and its presets, two scripts' windows) each
want memory gauges; two samplers on one registry would record every gauge twice. They
lease the registry's sampler instead; the last one to let go stops it.
"""

from __future__ import annotations

import threading

from .._registry import Registry
from ._sampler import ResourceSampler

_LOCK = threading.Lock()
_LEASES: dict[int, tuple[ResourceSampler, int]] = {}


def lease(registry: Registry, interval_s: float) -> ResourceSampler:
    """The running sampler of ``registry`` (started now if there is none)."""
    with _LOCK:
        held = _LEASES.get(id(registry))
        if held is None or not held[0].running:
            sampler = ResourceSampler(interval_s, registry=registry).start()
            _LEASES[id(registry)] = (sampler, 1)
            return sampler
        _LEASES[id(registry)] = (held[0], held[1] + 1)
        return held[0]


def release(sampler: ResourceSampler) -> None:
    """Give a lease back; the sampler stops when nobody holds it."""
    with _LOCK:
        key = id(sampler.registry)
        held = _LEASES.get(key)
        if held is None or held[0] is not sampler:
            sampler.stop()
            return
        if held[1] > 1:
            _LEASES[key] = (sampler, held[1] - 1)
            return
        del _LEASES[key]
    sampler.stop()
