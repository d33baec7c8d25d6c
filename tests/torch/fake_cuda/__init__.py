"""A stand-in for ``torch`` at the seam ``SyncWatch(torch=...)``: what torch's sync debug mode does.

A tensor "on the device" synchronizes in ``item``, ``cpu``, ``tolist``, ``nonzero``, truth tests and
a blocking ``to``: it advances the fake clock by ``WAIT_NS`` (the host waiting for the GPU) and, in
the sync debug mode "warn", warns as torch's C++ does when its binding returns: a ``UserWarning``
whose text begins "called a synchronizing CUDA operation". ``unique`` synchronizes through no entry
point a watch wraps. This package's own frames are skipped when a site is named, as torch's are.
"""

from __future__ import annotations

import warnings
from types import SimpleNamespace
from typing import Any

WAIT_NS = 5_000_000
MESSAGE = "called a synchronizing CUDA operation (Triggered internally at CUDAFunctions.cpp:162.)"


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000_000

    def __call__(self) -> int:
        return self.now


clock = Clock()
mode = {"value": 0, "set": []}  # the debug mode, and every value it was set to


def _sync() -> None:
    clock.now += WAIT_NS
    if mode["value"] == 1:
        warnings.warn(MESSAGE, UserWarning, stacklevel=3)


class Tensor:
    def __init__(self, on_device: bool = True) -> None:
        self.on_device = on_device

    def _read(self) -> None:
        if self.on_device:
            _sync()

    def item(self) -> float:
        self._read()
        return 1.0

    def tolist(self) -> list[float]:
        return [self.item()]  # nested: the outer call is the one timed

    def cpu(self) -> Tensor:
        self._read()
        return Tensor(on_device=False)

    def to(self, device: str, non_blocking: bool = False) -> Tensor:
        if not non_blocking:
            self._read()
        return Tensor(on_device=device != "cpu")

    def nonzero(self) -> Tensor:
        self._read()
        return self

    def __bool__(self) -> bool:
        self._read()
        return True

    def __int__(self) -> int:
        self._read()
        return 1

    def __float__(self) -> float:
        self._read()
        return 1.0


def nonzero(t: Tensor) -> Tensor:
    return t.nonzero()


def unique(t: Tensor) -> Tensor:
    t._read()
    return t


def _set_mode(value: Any) -> None:
    value = {"default": 0, "warn": 1, "error": 2}.get(value, value)
    if value == 1 and not mode["set"]:
        warnings.warn("Synchronization debug mode is a prototype feature", UserWarning, stacklevel=2)
    mode["value"] = value
    mode["set"].append(value)


def _synchronize() -> None:
    clock.now += WAIT_NS  # an explicit synchronize: torch's debug mode does not warn for it


cuda = SimpleNamespace(
    is_available=lambda: True,
    get_sync_debug_mode=lambda: mode["value"],
    set_sync_debug_mode=_set_mode,
    synchronize=_synchronize,
)
