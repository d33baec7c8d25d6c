"""Each step part's GPU time, by CUDA events recorded where the host moves from part to part.

On a GPU the host's time in a part is not the device's: the host queues kernels and moves on
until something synchronizes. The device's own time per part comes from events on the current
stream: one is recorded when a step begins, at every change of part (``part_begin`` /
``part_end``: the part that ran since the last event is the one the recorder's ``StepParts``
says is current, so a nested closure's backward is backward's, never the optimizer's too), and
when the step ends. The elapsed time between two events is how long the stream took to reach
the second after the first: the kernels that part queued, plus any gap the device waited for
the host to queue more (a launch-bound part reads about its host time). Summed over a stage
epoch per part, this is ``STAGE.step.PART.gpu`` beside the host's ``STAGE.step.PART``; the
account's ``step_gpu`` subject; the metrics ``perf/STAGE/time/step_gpu/PART_s``.

Events are dear on the host: six cost 79-146 µs a step on an H200 (``docs/performance.md``), so
one step in ``EVERY`` is timed (the epoch's second, then every ``EVERY``-th: the first warms up),
and its whole span too
(``STAGE.step.gpu``, one record a timed step); the account scales the parts by the steps over the
steps timed. A part whose GPU time changes from step to step (a gradient-accumulation cycle's
optimizer step) is then sampled, not summed; ``every=1`` times each step.

Nothing waits on the device here: the pairs go to the registry's pending GPU timings
(``perfkit._gpu_events``), resolved when their end event has completed, at the latest when the
epoch's window is taken. A fault (an event that cannot be made or recorded) is warned about once
and turns the device timing off for the run; the segments it could not time are counted
(``lost``), and training goes on.

>>> import perfkit
>>> from perfkit.stages import StageRecorder
>>> class Event:  # a stand-in for torch.cuda.Event: the GPU boundary, faked (1 ms a record)
...     t = 0.0
...     def record(self): Event.t += 1.0; self.at = Event.t
...     def query(self): return True
...     def synchronize(self): pass
...     def elapsed_time(self, end): return end.at - self.at  # ms
>>> reg = perfkit.Registry()
>>> rec = StageRecorder(reg, device=DeviceParts(reg, Event, every=1))
>>> rec.begin("train", 0); rec.step_begin("train")
>>> rec.part_begin("backward"); rec.part_end("backward"); _ = rec.step_end("train")
>>> w = rec.end("train")
>>> {p: round(s * 1e3) for p, s in w.account.subjects["step_gpu"].items()}
{'forward': 1, 'backward': 1, 'rest': 1}
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .._context import NODES
from .._gpu_events import EventFactory, GpuEvent, pend
from .._validate import check_int
from .._warn import WarnOnce
from ..names import gpu_series, step_part_series, step_series

EVERY = 10
"""One step in this many is timed on the device (see the module docstring)."""


class DeviceParts:
    """A recorder's device timing of its steps' parts (see the module docstring)."""

    __slots__ = ("_events", "_first", "_mark", "_nodes", "_ready", "_registry", "_warn", "every", "lost")

    def __init__(
        self,
        registry: Any,
        events: EventFactory,
        *,
        ready: Callable[[], bool] | None = None,
        every: int = EVERY,
    ) -> None:
        if not callable(events):
            raise TypeError(f"events must be a callable returning CUDA events, got {events!r}")
        self.every = check_int(every, "every", low=1)
        self._first: tuple[GpuEvent, int] | None = None  # the timed step's first event, and when
        if ready is not None and not callable(ready):
            raise TypeError(f"ready must be a callable or None, got {ready!r}")
        self._registry = registry
        self._ready = ready  # no event before the program uses the GPU, nor while a graph is captured
        self._events: EventFactory | None = events
        self._mark: tuple[GpuEvent, int] | None = None  # the last event of the open step, and when
        self._nodes: dict[tuple[int, str, str], int] = {}  # (base, stage, part or "") -> its node
        self._warn = WarnOnce()
        self.lost = 0  # segments not timed after a fault

    def step_begins(self, index: int, now: int) -> None:
        """The ``index``-th step of the epoch begins at ``now`` (host ns): its first event, where
        it is one of the steps timed."""
        self._mark = None
        if index % self.every != 1 % self.every or self._events is None:
            return
        if self._ready is not None and not self._ready():
            return  # an event would initialize CUDA (a context, its memory) for a CPU-only program
        try:
            event = self._events()
            event.record()
        except Exception as exc:
            self._fault(exc)
            return
        self._mark = self._first = (event, now)

    def switch(self, stage: str, base: int, part: str, now: int) -> None:
        """The step's part changes at ``now``: what ran since the last event was ``part``."""
        if self._mark is None:
            return
        if self._ready is not None and not self._ready():  # a CUDA graph being captured, say
            self._mark = self._first = None  # this step goes untimed: an event now would break it
            return
        start, t0 = self._mark
        try:
            assert self._events is not None
            end = self._events()
            end.record()
        except Exception as exc:
            self._mark = None
            self._fault(exc)
            return
        pend(self._registry, self._node(stage, base, part), t0, start, end)
        self._mark = (end, now)

    def step_ends(self, stage: str, base: int, part: str, now: int) -> None:
        """The step ends at ``now``, its last stretch being ``part``'s; a timed step's whole span is
        ``STAGE.step.gpu``."""
        self.switch(stage, base, part, now)
        if self._mark is not None and self._first is not None:
            (start, t0), (end, _) = self._first, self._mark
            pend(self._registry, self._node(stage, base, None), t0, start, end)
        self._mark = self._first = None

    def _node(self, stage: str, base: int, part: str | None) -> int:
        """The node of ``part``'s GPU series (None: the whole step's)."""
        key = (base, stage, part or "")
        node = self._nodes.get(key)
        if node is None:
            series = gpu_series(step_series(stage) if part is None else step_part_series(stage, part))
            node = self._nodes[key] = NODES.child(base, series, overlay=True)
        return node

    def _fault(self, exc: Exception) -> None:
        self._events = None
        self.lost += 1
        self._warn(
            "device-parts",
            f"perfkit: timing the step's parts on the GPU failed ({exc!r}); the parts' device time is "
            "off for the rest of the run, training goes on",
        )
