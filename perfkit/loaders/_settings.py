"""What a loader ran with and what its batches cost in CPU: the facts advice is computed from.

Two kinds of gauge, recorded where a loader's batches are handed out (the instrumented
DataLoader's ``__next__``, a script window's ``iterate``):

* its settings (``LOADER_SETTINGS``, torch's thread count, the usable cores), once per
  ``iter()``: what was actually set, so advice and ``perfkit compare`` can refer to it;
* the process's CPU seconds during each wait and during the loop's body between two waits
  (``CpuSplit``). Wall time cannot tell a batch that computes from one that sleeps on a disk
  or a network, and only the first competes with the model for cores: the CPU time per wall
  second of each side is what the gain of more workers is bounded by.

    >>> import perfkit
    >>> reg = perfkit.Registry()
    >>> record_settings(reg, "train", type("L", (), {"num_workers": 2, "pin_memory": False})())
    >>> reg.snapshot().gauges["train.loader.num_workers"].last
    2.0
"""

from __future__ import annotations

import os
import sys
import time

from .._registry import Registry
from ..names import (
    LOADER_SETTINGS,
    TORCH_THREADS,
    USABLE_CORES,
    loop_cpu_gauge,
    setting_gauge,
    wait_cpu_gauge,
)


def usable_cores() -> int:
    """Cores this process may run on (its affinity; the machine's count where there is none)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def record_settings(registry: Registry, loader: str, source: object) -> None:
    """Record ``source``'s DataLoader settings (read by name: any loader that has them), torch's
    thread count where torch is loaded, and the usable cores, as gauges of ``loader``."""
    for name in LOADER_SETTINGS:
        value = getattr(source, name, None)
        if isinstance(value, (bool, int, float)):
            registry.gauge(setting_gauge(loader, name), float(value))
    torch = sys.modules.get("torch")  # never imported here: a loop without torch has no threads of it
    threads = getattr(torch, "get_num_threads", None)
    if callable(threads):
        registry.gauge(TORCH_THREADS, float(threads()))
    registry.gauge(USABLE_CORES, float(usable_cores()))


class CpuSplit:
    """The process's CPU time split between a loop's waits and its body, one sample per batch.

    Call ``wait_started`` before each ``next()`` and ``wait_ended`` after it; the body is what
    runs between one ``wait_ended`` and the next ``wait_started``. Costs two clock reads and two
    gauge samples a batch (about 3 µs).
    """

    __slots__ = ("_body_from", "_loader", "_wait_from")

    def __init__(self, loader: str) -> None:
        self._loader = loader
        self._body_from: int | None = None
        self._wait_from = 0

    def wait_started(self, registry: Registry) -> None:
        now = time.process_time_ns()
        if self._body_from is not None:
            registry.gauge(loop_cpu_gauge(self._loader), (now - self._body_from) / 1e9)
        self._wait_from = now

    def wait_ended(self, registry: Registry) -> None:
        now = time.process_time_ns()
        registry.gauge(wait_cpu_gauge(self._loader), (now - self._wait_from) / 1e9)
        self._body_from = now

    def stopped(self) -> None:
        """The loop ended (or broke off): the time until the next ``wait_started`` is not its body."""
        self._body_from = None
