"""Warn once per kind of fault: monitoring must never flood the user's log, nor crash their run."""

from __future__ import annotations

import threading
import warnings


class PerfkitWarning(UserWarning):
    """A fault inside perfkit's monitoring (a source, a logger, a trace) that the run survives."""


def warn(message: str) -> None:
    """Issue a ``PerfkitWarning`` from inside monitoring."""
    warnings.warn(message, PerfkitWarning, stacklevel=3)


class WarnOnce:
    """Each component owns one: the first fault of each kind is reported, the rest only counted.

    >>> warn = WarnOnce()
    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as seen:
    ...     warnings.simplefilter("always")
    ...     _ = warn("nvml:NVMLError", "NVML failed"), warn("nvml:NVMLError", "NVML failed")
    >>> len(seen), warn.counts["nvml:NVMLError"]
    (1, 2)
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.counts: dict[str, int] = {}

    def __call__(self, key: str, message: str) -> bool:
        with self._lock:
            n = self.counts.get(key, 0)
            self.counts[key] = n + 1
        if n == 0:
            warnings.warn(message, PerfkitWarning, stacklevel=3)
        return n == 0

    def after_fork(self) -> None:
        self._lock = threading.Lock()
