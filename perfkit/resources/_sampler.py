"""``ResourceSampler``: a daemon thread that polls memory and utilisation into gauge series.

    with perfkit.ResourceSampler(interval_s=0.1):
        trainer.fit(model)

Every call into a source (NVML, psutil, torch.cuda), opening and closing included, runs
on the sampler's own thread: a driver call that hangs stalls the sampler, never the
training loop. The training thread waits at most ``timeout_s`` for anything the
sampler does (``start``, ``sample_now``, ``stop``) and not at all once the sampler is
known to be stuck; a source call that overran ``timeout_s`` is warned about, and a
source that does so three times is dropped. It sleeps on ``Event.wait(interval)``, so
``stop()`` returns within one interval; sources that cannot run here are skipped with
one log line; a source that fails mid-run is warned about once per kind of fault while
the others go on. A forked child (a DataLoader worker) inherits no running sampler and
no held lock.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from types import TracebackType
from typing import Any

from .._registry import Registry, check_registry, get_registry
from .._validate import check_number
from .._warn import WarnOnce
from ._sources import SOURCES, Source, SourceUnavailable, default_sources

log = logging.getLogger("perfkit")
_ALIVE: weakref.WeakSet[ResourceSampler] = weakref.WeakSet()
MAX_INTERVAL_S = 3600.0
MAX_TIMEOUT_S = 60.0
STRIKES = 3
"""Calls past ``timeout_s`` after which a source is dropped."""


class ResourceSampler:
    """Poll ``sources`` every ``interval_s`` seconds (at most 3600) into ``registry`` (default: the
    current one).

    ``sources`` are source objects or the names ``"nvml"``, ``"process"``, ``"torch_cuda"``;
    by default all three, each skipped when unavailable. ``timeout_s`` (at most 60) bounds how
    long the caller's thread ever waits for the sampler.

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
        timeout_s: float = 0.5,
    ) -> None:
        self.interval_s = check_number(interval_s, "interval_s", high=MAX_INTERVAL_S)
        self.timeout_s = check_number(timeout_s, "timeout_s", high=MAX_TIMEOUT_S)
        check_registry(registry)
        self.registry = registry or get_registry()
        self._sources = _resolve(sources)
        self._active: list[Source] = []
        self._warn = WarnOnce()
        self._lock = threading.Lock()
        self._cond = threading.Condition()
        self._fresh()
        self._cpu_s = 0.0
        self.samples = 0
        self.latest: Mapping[str, float] = {}
        """The values of the last complete sample, by gauge name."""
        self.strikes: dict[str, int] = {}
        """Per source: calls that overran ``timeout_s``."""
        _ALIVE.add(self)

    def _fresh(self) -> None:
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._opened = threading.Event()
        self._thread: threading.Thread | None = None
        self._started = self._completed = 0
        self._busy: tuple[str, float] | None = None  # (source, since) while a source call runs

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

    @property
    def stuck(self) -> str | None:
        """The source whose call has run past ``timeout_s`` right now, if any."""
        busy = self._busy
        return busy[0] if busy is not None and time.monotonic() - busy[1] > self.timeout_s else None

    def start(self) -> ResourceSampler:
        """Start the thread, which opens the sources and polls them; waits at most ``timeout_s`` for
        the sources to open. Calling it again while running does nothing."""
        with self._lock:
            if self.running:
                return self
            self._fresh()
            self._thread = threading.Thread(target=self._run, name="perfkit-sampler", daemon=True)
            self._thread.start()
            opened = self._opened
        if not opened.wait(self.timeout_s):
            self._say_stuck("opening")
        return self

    def stop(self) -> None:
        """Stop polling: the thread takes a last sample and closes the sources. Waits at most
        ``timeout_s`` for it (none while a source is stuck); a thread stuck in a source is left
        behind, a daemon. Idempotent."""
        with self._lock:
            thread = self._thread
            if thread is None:
                return
            self._thread = None
            self._stop.set()
            self._wake.set()
        if thread is not threading.current_thread():
            if self.stuck is None:  # known to be stuck: no wait at all
                thread.join(self.timeout_s)
            if thread.is_alive():
                self._say_stuck("stopping")

    def sample_now(self) -> None:
        """Have the thread take a sample now (the end of an epoch); ``latest`` then holds its values.

        Waits at most ``timeout_s`` for it, and not at all while a source is stuck: ``latest``
        then holds the values of the last sample that completed.
        """
        thread = self._thread
        if thread is None or not thread.is_alive() or thread is threading.current_thread():
            return
        if self.stuck is None:
            with self._cond:
                target = self._started + 1
                self._wake.set()
                if not self._cond.wait_for(lambda: self._completed >= target, self.timeout_s):
                    self._say_stuck("sampling")

    # ---- the sampler's thread ---------------------------------------------------------------

    def _run(self) -> None:
        # This run's own state: a thread left behind stuck in a source never touches a later run's.
        stop, wake, opened = self._stop, self._wake, self._opened
        active: list[Source] = []
        try:
            self._open(active)
        finally:
            opened.set()
        while True:
            self._sample(active)
            if stop.is_set():
                break
            wake.wait(self.interval_s)
            wake.clear()
            if stop.is_set():
                self._sample(active)  # the last one, to the very end of the run
                break
        for source in active:
            try:
                self._call(source, "close", source.close, active)
            except Exception:  # already warned about
                continue

    def _open(self, active: list[Source]) -> None:
        self._active = active
        for source in self._sources:
            try:
                self._call(source, "open", source.open, active, quiet=(SourceUnavailable,))
                active.append(source)
            except SourceUnavailable as exc:
                level = logging.DEBUG if exc.expected else logging.INFO
                log.log(level, "perfkit: resource source %r is off: %s", source.name, exc)
            except Exception:  # already warned about by _call
                continue

    def _sample(self, active: list[Source]) -> None:
        with self._cond:
            self._started += 1
            n = self._started
        t_start = time.thread_time()
        t_ns = self.registry.clock()
        out: dict[str, float] = {}
        for source in list(active):
            try:
                values = self._call(source, "sample", partial(source.sample, self._warn), active)
            except Exception:
                continue
            for name, value in values.items():
                try:
                    self.registry.gauge(name, value, t_ns=t_ns)
                    out[name] = float(value)
                except (TypeError, ValueError) as exc:
                    self._warn(f"{source.name}:value", f"perfkit: source {source.name!r} gave {exc}")
        self.latest = out
        self._cpu_s += time.thread_time() - t_start
        with self._cond:
            self.samples += 1
            self._completed = n
            self._cond.notify_all()

    def _call(
        self,
        source: Source,
        what: str,
        fn: Callable[[], Any],
        active: list[Source],
        quiet: tuple[type[Exception], ...] = (),
    ) -> Any:
        """``fn()`` on this thread, timed: an overrun is a strike, and three strikes drop the source."""
        started = time.monotonic()
        self._busy = (source.name, started)
        try:
            return fn()
        except quiet:
            raise
        except Exception as exc:  # a fault in monitoring never reaches the training loop
            self._warn(
                f"{source.name}:{type(exc).__name__}", f"perfkit: source {source.name!r} failed: {exc!r}"
            )
            raise
        finally:
            took = time.monotonic() - started
            self._busy = None
            if took > self.timeout_s:
                self._strike(source, what, took, active)

    def _strike(self, source: Source, what: str, took: float, active: list[Source]) -> None:
        n = self.strikes[source.name] = self.strikes.get(source.name, 0) + 1
        dropped = n >= STRIKES and source in active
        if dropped:
            active.remove(source)
        self._warn(
            f"{source.name}:slow",
            f"perfkit: source {source.name!r} took {took:.1f} s to {what} (timeout_s={self.timeout_s:g}); "
            f"{'it is dropped' if dropped else f'it is dropped after {STRIKES} such calls'}; training "
            "never waits for it (said once)",
        )

    def _say_stuck(self, doing: str) -> None:
        self._warn(
            f"stuck:{doing}",
            f"perfkit: the resource sampler is stuck in source {self.stuck or '?'!r} while {doing}; the "
            f"training thread waited {self.timeout_s:g} s (timeout_s) and goes on without it (said once)",
        )

    def __enter__(self) -> ResourceSampler:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def _after_fork(self) -> None:
        # The thread did not survive the fork; the locks may have been held by it.
        self._lock = threading.Lock()
        self._cond = threading.Condition()
        self._fresh()
        self._active = []
        self._warn.after_fork()


def _resolve(sources: Sequence[Source | str] | None) -> list[Source]:
    if sources is None:
        return default_sources()
    if isinstance(sources, str):
        raise TypeError(f"sources must be a list of sources or names, got the string {sources!r}")
    if not isinstance(sources, Sequence):
        raise TypeError(f"sources must be a list of sources or names, got {sources!r}")
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
