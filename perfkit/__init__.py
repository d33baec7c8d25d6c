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
and their account), ``perfkit.run`` (the run directory), ``perfkit.sinks``,
``perfkit.resources``, ``perfkit.findings``, ``perfkit.trace`` (profiler traces),
``perfkit.reports`` (every renderer: text, HTML, Chrome traces), ``perfkit.torch`` (DataLoader
workers, profiler windows), and ``perfkit.names`` (the names of every series and mark, and the
glossary of the words in public names).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ._accel import hot_path
from ._api import cursor, reset, snapshot
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
from .stages import intervals_from as _intervals_from

if TYPE_CHECKING:
    import os
    from pathlib import Path

    from torch.utils.data import DataLoader

    from .monitor import ScriptWindow
    from .run import RunWriter, TrialResult, TrialSetting
    from .sinks import Sink
    from .stages import StageListener


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


def write_chrome_trace(path: str | os.PathLike[str], source: Snapshot | Registry) -> Path:
    """Write ``source``'s retained records as a Chrome trace (gzip when ``path`` ends in ``.gz``):
    one row per thread, nested sections as a flame chart in Perfetto or ``chrome://tracing``. The
    writer is ``perfkit.reports.write_chrome_trace``, loaded on the first call.

    >>> import perfkit, tempfile, os
    >>> reg = perfkit.Registry()
    >>> with perfkit.section("load", registry=reg):
    ...     pass
    >>> perfkit.write_chrome_trace(os.path.join(tempfile.mkdtemp(), "t.json.gz"), reg).suffix
    '.gz'
    """
    from .reports import write_chrome_trace as write

    return write(path, source)


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
    "trial",
    "use_registry",
    "window",
    "write_chrome_trace",
]


def window(
    stage: str,
    *,
    epoch: int,
    sinks: Sequence[Sink] = (),
    run: RunWriter | None = None,
    registry: Registry | None = None,
    step: int | None = None,
    listeners: Sequence[StageListener] = (),
    gather: Callable[[Any], Sequence[Any]] | None = None,
    rank: int | None = None,
    console: bool = True,
    interval_steps: int | None = None,
    interval_s: float | None = None,
    intervals: bool | None = None,
) -> ScriptWindow:
    """One stage epoch of a plain script: metrics to ``run`` and ``sinks`` when the block ends, and
    the epoch's block (its account and top verdict) logged through ``logging`` (``console=False``: none).

    Windows of one run (``run``, else ``registry``) share one session (``perfkit.monitor.Session``):
    training's time per sample, the other stages' reference, and the console's history.
    ``gather=perfkit.torch.gather_ranks`` merges the ranks of a job of several processes (every rank
    enters the same windows in the same order; ``rank`` defaults to torch.distributed's), and only
    rank 0 sends and logs (docs/accelerate-fabric.md). ``step`` is what sinks get as the step
    (default: a count of the run's windows); ``listeners`` follow the stage epoch as it runs
    (``perfkit.torch.ProfilerWindows``).
    A long epoch is also reported while it runs, every ``interval_steps`` steps or ``interval_s``
    seconds after a warm-up of 10 steps (a provisional block, metrics under ``perf/interval``):
    by default (``intervals=None``) for a loop over a stream without a length or an epoch still
    running after three minutes; ``intervals=True`` every epoch, ``False`` never.

    >>> import perfkit, numpy as np
    >>> with perfkit.window("val", epoch=0, registry=perfkit.Registry(), console=False) as w:
    ...     for batch in w.iterate([np.zeros((2, 8)), np.zeros((2, 8))]):
    ...         pass
    >>> w.metrics["perf/val/steps"], w.metrics["perf/val/samples"]
    (2.0, 4.0)
    """
    from .monitor import ScriptWindow, script_run  # the monitor loads findings: not at import

    owner = script_run(run=run, registry=registry, gather=gather, rank=rank, console=console)
    return ScriptWindow(
        owner,
        stage,
        epoch=epoch,
        sinks=sinks,
        writer=run,
        step=step,
        listeners=listeners,
        intervals=_intervals_from(intervals, interval_steps, interval_s),
    )


def trial(
    loader: DataLoader[Any],
    *,
    name: str = "train",
    need_batches_per_s: float | None = None,
    budget_s: float = 30.0,
    batches: int = 30,
    workers: Sequence[int] | None = None,
    progress: Callable[[TrialSetting], None] | None = None,
    run: RunWriter | None = None,
) -> TrialResult:
    """Time ``loader`` alone (no model) at each worker count up to the usable cores (and past them
    while the workers wait and the rate still rises), then persistent workers, a deeper prefetch
    and pinned memory at the best one, within ``budget_s`` seconds; pick the smallest setting
    that keeps up with ``need_batches_per_s`` (the rate the training loop consumed batches), else
    the fastest. ``perfkit.reports.trial_text(result)`` says it in words,
    ``run=`` records it where a verdict's gain is read from. The rest: ``perfkit.torch.trial``
    (this is it, loaded with torch on the first call); the command line: ``perfkit trial``.
    """
    from .torch import trial as run_trial

    return run_trial(
        loader,
        name=name,
        need_batches_per_s=need_batches_per_s,
        budget_s=budget_s,
        batches=batches,
        workers=workers,
        progress=progress,
        run=run,
    )
