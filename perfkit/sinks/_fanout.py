"""One output path: a ``Sink`` protocol and the fan-out that isolates each sink's failures.

Everything perfkit publishes per stage epoch (``perfkit.window``, the Lightning monitor
and its presets, the profiler's trace analyses) goes through a ``SinkFanout``. The fan-out
owns the policy: a sink that raises is warned about once per kind of fault, counted, and
skipped; the others still get the window, and nothing raises into training.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Protocol, runtime_checkable

from .._warn import warn
from ..stages import StageWindow


class Failures:
    """What failed, per sink: counts of failed calls, and the kinds of fault already warned about.

    One ``Failures`` can be shared by several fan-outs (the windows of one run), so each kind
    of fault is said once for all of them.
    """

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self.said: set[str] = set()


@runtime_checkable
class Sink(Protocol):
    """Receives the metrics of each stage epoch; ``step`` is the x-axis value to log them at."""

    def emit(self, window: StageWindow, metrics: Mapping[str, float], step: int) -> None: ...

    def close(self) -> None: ...


class SinkFanout:
    """Send each window to every sink; a sink that fails is warned about once and skipped.

    ``failures.counts`` counts, per sink, the calls that raised (what was lost).

    >>> from perfkit.sinks import SinkFanout
    >>> class Down:
    ...     def emit(self, window, metrics, step): raise ConnectionError("server down")
    ...     def close(self): pass
    >>> import warnings
    >>> fan = SinkFanout([Down()])
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")
    ...     fan.emit(None, {}, 0); fan.emit(None, {}, 1)  # type: ignore[arg-type]
    >>> fan.failures.counts
    {'Down': 2}
    """

    def __init__(self, sinks: Iterable[Sink] = (), *, failures: Failures | None = None) -> None:
        self.sinks: list[Sink] = check_sinks(sinks)
        self.failures = failures if failures is not None else Failures()

    def add(self, sink: Sink) -> None:
        """Send later windows to ``sink`` too."""
        self.sinks.extend(check_sinks([sink]))

    def emit(self, window: StageWindow, metrics: Mapping[str, float], step: int) -> None:
        for sink in self.sinks:
            try:
                sink.emit(window, metrics, step)
            except Exception as exc:  # a sink that is down must not stop training
                self.record_failure(sink, "emit", exc)

    def close(self) -> None:
        for sink in self.sinks:
            try:
                sink.close()
            except Exception as exc:
                self.record_failure(sink, "close", exc)

    def record_failure(self, sink: object, call: str, exc: Exception, *, message: str | None = None) -> None:
        """Count a failed ``call`` of ``sink`` (an object, or a name) and warn once per kind of fault;
        ``message`` replaces the warning's text."""
        name = sink if isinstance(sink, str) else sink_name(sink)
        key = f"{name}:{call}:{type(exc).__name__}"
        f = self.failures
        f.counts[name] = f.counts.get(name, 0) + 1
        if key not in f.said:
            f.said.add(key)
            # A sink that stands for another object says which of its methods failed (``method``).
            what = f"{name}.{getattr(sink, 'method', call) if call == 'emit' else call}"
            warn(
                message or f"perfkit: {what} failed: {exc!r}; training goes on (said once per kind of fault)"
            )


def sink_name(sink: object) -> str:
    """How warnings and counts name a sink: its ``name`` attribute, else its class."""
    name = getattr(sink, "name", None)
    return name if isinstance(name, str) and name else type(sink).__name__


def check_sinks(sinks: object) -> list[Sink]:
    """``sinks=`` as every constructor takes it: a list of objects with ``emit`` (and ``close``)."""
    if hasattr(sinks, "emit") or not isinstance(sinks, Iterable) or isinstance(sinks, (str, bytes)):
        raise TypeError(f"sinks must be a list of sinks, got {sinks!r}: pass [sink]")
    out = list(sinks)
    for s in out:
        if not callable(getattr(s, "emit", None)):
            raise TypeError(f"sinks: {s!r} has no emit(window, metrics, step) method")
    return out
