"""``ResourceSampler``: a daemon thread that polls memory and utilisation into gauge series.

    with perfkit.ResourceSampler(interval_s=0.1):
        trainer.fit(model)

It sleeps on ``Event.wait(interval)``, so ``stop()`` returns within one interval;
sources that cannot run here are skipped with one log line; a source that fails
mid-run is warned about once per kind of fault while the others go on; nothing
it does raises into the user's threads. A forked child (a DataLoader worker)
inherits no running sampler and no held lock.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import weakref
from collections.abc import Sequence
from types import TracebackType

from .._registry import Registry, check_registry, get_registry
from .._warn import WarnOnce
from ._sources import SOURCES, Source, SourceUnavailable, default_sources

log = logging.getLogger("perfkit")
_ALIVE: weakref.WeakSet[ResourceSampler] = weakref.WeakSet()


class ResourceSampler:
    """Poll ``sources`` every ``interval_s`` seconds into ``registry`` (default: the current one).

    ``sources`` are source objects or the names ``"nvml"``, ``"process"``, ``"torch_cuda"``;
    by default all three, each skipped when unavailable.

    >>> import perfkit
    >>> reg = perfkit.Registry()
    >>> with perfkit.ResourceSampler(0.05, registry=reg, sources=["process"]) as sampler:
    ...     sampler.sample_now()
    >>> "process.rss_mb" in reg.snapshot().gauges
    True
    """

    def __init__(
        self,
        interval_s: float = 0.1,
        *,
        registry: Registry | None = None,
        sources: Sequence[Source | str] | None = None,
    ) -> None:
        if isinstance(interval_s, bool) or not isinstance(interval_s, (int, float)) or not interval_s > 0:
            raise ValueError(f"interval_s must be a number > 0, got {interval_s!r}")
        check_registry(registry)
        self.interval_s = float(interval_s)
        self.registry = registry or get_registry()
        self._sources = _resolve(sources)
        self._active: list[Source] = []
        self._warn = WarnOnce()
        self._lock = threading.Lock()
        self._sampling = threading.Lock()  # sample_now() from a user thread and the sampler's own
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._cpu_s = 0.0
        self.samples = 0
        _ALIVE.add(self)

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    @property
    def sources(self) -> list[str]:
        """Names of the sources that opened and are being polled."""
        return [s.name for s in self._active]

    @property
    def cpu_time_s(self) -> float:
        """CPU time the sampling thread has used so far (what the sampler costs)."""
        return self._cpu_s

    def start(self) -> ResourceSampler:
        """Open the sources and start polling; calling it again while running does nothing."""
        with self._lock:
            if self.running:
                return self
            self._active = []
            for source in self._sources:
                try:
                    source.open()
                    self._active.append(source)
                except SourceUnavailable as exc:
                    log.info("perfkit: resource source %r is off: %s", source.name, exc)
            self._stop = threading.Event()
            self._thread = threading.Thread(target=self._run, name="perfkit-sampler", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        """Stop polling (within one interval), take a last sample and close the sources; idempotent."""
        with self._lock:
            thread = self._thread
            if thread is None:
                return
            self._stop.set()
            if thread is not threading.current_thread():
                thread.join()
            self._thread = None
            self.sample_now()
            for source in self._active:
                source.close()

    def sample_now(self) -> None:
        """Take one sample of every open source now (e.g. at the end of an epoch)."""
        t_start = time.thread_time()
        t_ns = self.registry.clock()
        for source in self._active:
            try:
                values = source.sample(self._warn)
            except Exception as exc:  # a fault in monitoring never reaches the training loop
                self._warn(
                    f"{source.name}:{type(exc).__name__}", f"perfkit: source {source.name!r} failed: {exc!r}"
                )
                continue
            for name, value in values.items():
                self.registry.gauge(name, value, t_ns=t_ns)
        self.samples += 1
        self._cpu_s += time.thread_time() - t_start

    def _run(self) -> None:
        stop = self._stop
        while True:
            self.sample_now()
            if stop.wait(self.interval_s):
                return

    def __enter__(self) -> ResourceSampler:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def _after_fork(self) -> None:
        # The thread did not survive the fork; the locks may have been held by it.
        self._lock = threading.Lock()
        self._sampling = threading.Lock()
        self._stop = threading.Event()
        self._thread = None
        self._active = []
        self._warn.after_fork()


def _resolve(sources: Sequence[Source | str] | None) -> list[Source]:
    if sources is None:
        return default_sources()
    if isinstance(sources, str):
        raise TypeError(f"sources must be a list of sources or names, got the string {sources!r}")
    out: list[Source] = []
    for s in sources:
        if isinstance(s, str):
            if s not in SOURCES:
                raise ValueError(f"sources: unknown source {s!r}, expected one of {sorted(SOURCES)}")
            out.append(SOURCES[s]())
        elif callable(getattr(s, "sample", None)) and callable(getattr(s, "open", None)):
            out.append(s)
        else:
            raise TypeError(f"sources: {s!r} is neither a source name nor an object with open() and sample()")
    return out


def _after_fork_in_child() -> None:
    for sampler in list(_ALIVE):
        sampler._after_fork()


os.register_at_fork(after_in_child=_after_fork_in_child)
