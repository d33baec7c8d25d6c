"""perfkit: find out where a PyTorch training or validation loop spends its time.

    import perfkit

    @perfkit.timed                                  # a function, method, coroutine or generator
    def collate(samples): ...

    start = perfkit.cursor()                        # open a window (an epoch, a stage)
    for batch in perfkit.timed_iter(loader, "train"):   # time spent waiting for each batch
        with perfkit.section("forward"):            # a block, nested sections form a tree
            ...
    print(perfkit.report(perfkit.snapshot(since=start)))

Records go to a bounded, thread-safe registry; snapshots give count, total, mean, median,
p95, p99, std, min and max per series over any window. What a first hour needs is here;
the rest lives in subpackages with their own ``__all__``: ``perfkit.stages`` (stage epochs
and their account), ``perfkit.run`` (script windows, the run directory), ``perfkit.sinks``,
``perfkit.resources``, ``perfkit.findings``, ``perfkit.trace`` (profiler traces),
``perfkit.reports`` (every renderer: text and HTML), ``perfkit.torch`` (DataLoader workers,
profiler windows), and ``perfkit.names`` (the names of every series and mark).
"""

from ._accel import hot_path
from ._api import cursor, reset, snapshot
from ._chrome import write_chrome_trace
from ._iteration import timed_iter
from ._registry import Cursor, Registry, get_registry, use_registry
from ._section import section
from ._snapshot import Snapshot
from ._state import disable, enable, is_enabled
from ._stats import Stats
from ._timing import timed
from ._version import __version__
from ._warn import PerfkitWarning
from .resources import ResourceSampler
from .run import window


def report(snapshot: Snapshot | None = None) -> str:
    """Render ``snapshot`` (default: the current registry's whole run) as text.

    Rows are the section tree (siblings by total time) with count, total, self time and
    mean, p95 and max; loops timed with ``timed_iter`` and gauges follow. The renderer is
    ``perfkit.reports.snapshot_text``, loaded on the first call.

    >>> import perfkit
    >>> reg = perfkit.Registry()
    >>> with perfkit.section("epoch", registry=reg):
    ...     pass
    >>> print(perfkit.report(reg.snapshot()).splitlines()[2].split()[0])
    epoch
    """
    from .reports import snapshot_text

    return snapshot_text(snapshot)


__all__ = [
    "Cursor",
    "PerfkitWarning",
    "Registry",
    "ResourceSampler",
    "Snapshot",
    "Stats",
    "__version__",
    "cursor",
    "disable",
    "enable",
    "get_registry",
    "hot_path",
    "is_enabled",
    "report",
    "reset",
    "section",
    "snapshot",
    "timed",
    "timed_iter",
    "use_registry",
    "window",
    "write_chrome_trace",
]
