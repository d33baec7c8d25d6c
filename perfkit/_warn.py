"""Warn once per kind of fault: monitoring must never flood the user's log, nor crash their run.

A warning is issued from inside training (a drain, a window's end, a sink's failure).
Where warnings are turned into errors (``pytest -W error``, ``warnings.simplefilter
("error")``), ``warnings.warn`` raises: perfkit then logs the message on the "perfkit"
logger instead, so the run goes on whatever the warning filters say.
"""

from __future__ import annotations

import logging
import threading
import warnings

log = logging.getLogger("perfkit")


class PerfkitWarning(UserWarning):
    """A fault inside perfkit's monitoring (a source, a logger, a trace) that the run survives."""


def _issue(message: str, stacklevel: int) -> None:
    try:
        warnings.warn(message, PerfkitWarning, stacklevel=stacklevel + 1)
    except Exception:  # the filter turned it into an error: it must not reach training
        log.warning("%s", message)


def warn(message: str) -> None:
    """Issue a ``PerfkitWarning`` from inside monitoring (logged instead where warnings raise).

    >>> import warnings
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("error")
    ...     warn("perfkit: a sink failed")  # logged on "perfkit", never raised
    """
    _issue(message, stacklevel=3)


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
            _issue(message, stacklevel=3)
        return n == 0

    def after_fork(self) -> None:
        self._lock = threading.Lock()
