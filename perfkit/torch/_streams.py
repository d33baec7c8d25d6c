"""Collectives on CUDA: the wait is the stream's, timed by two events on the stream that waits.

On CUDA (NCCL) no host thread is held: a synchronous call returns once the collective is queued,
and ``work.wait()`` only makes the current stream wait for it. What the step loses is the time its
stream stands still at that wait. Two CUDA events recorded on the waiting stream, one just before
the wait is queued and one just after, are that time: nothing runs between them on that stream but
the wait. They are resolved at a later drain, never by a synchronize (``perfkit._cuda.record_gpu_span``).

A stream waits in three places:

* a synchronous call on the stream that computes (``dist.all_reduce(t)`` in a loop): events
  around the call;
* ``work.wait()`` of an asynchronous call: events around it;
* FSDP2 issues its all-gathers and reduce-scatters on streams of its own (synchronous calls
  there hold only that stream) and the computing stream waits for them later, on an event
  recorded there: ``current_stream().wait_event(all_gather_event)`` before a layer's copy-out,
  ``wait_event(post_reduce_event)`` in the next layer's post-backward or at the end of backward.
  So a collective called on a side stream marks that stream, the events recorded on it from then
  on carry the collective, and a ``Stream.wait_event`` of such an event by the current stream is
  timed as above, in the step part running then (forward: the next layer's all-gather).

A side stream is any but the device's default stream: a loop that computes on a stream of its own
has its synchronous collectives' waits unseen (an asynchronous one's ``wait()`` is still timed).
The device-generic ``torch.Stream`` (``torch.accelerator``) is not wrapped: FSDP2 waits on it only
for a step it abandons.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any, Protocol

from .._gpu_events import EventFactory, GpuEvent


class WaitSink(Protocol):
    """Where a device wait goes: the collectives' consumers (``perfkit.torch._collectives``)."""

    def clock(self) -> int: ...

    def events(self) -> EventFactory | None: ...

    def span(self, collective: str, t0: int, start: GpuEvent, end: GpuEvent) -> None: ...

    def tag(self, work: Any, collective: str, device: bool) -> None: ...


class Streams:
    """The waits of collectives on a device with streams; ``cuda`` is ``torch.cuda`` or, in the
    tests, a fake with ``current_stream()``, ``default_stream()`` and a ``Stream`` class."""

    def __init__(self, cuda: Any) -> None:
        self.cuda = cuda
        self._marked: dict[Any, str] = {}  # side stream -> the collective last called on it
        self._events: dict[int, tuple[weakref.ref[Any], str]] = {}  # id(event) -> (event, collective)

    def holds(self, tensor: Any) -> bool:
        """Whether ``tensor`` is on this device (its collectives' waits are the stream's)."""
        return bool(tensor.is_cuda)

    def call(self, fn: Callable[..., Any], collective: str, args: Any, kwargs: Any, sink: WaitSink) -> Any:
        """Call the collective ``fn``: timed where the stream that computes runs it synchronously,
        its stream marked where it is a side stream, its work tagged where it is asynchronous."""
        stream = self.cuda.current_stream()
        events = sink.events()
        if stream != self.cuda.default_stream() or events is None:
            work = fn(*args, **kwargs)
            if work is None:
                self._marked[stream] = collective
            else:
                sink.tag(work, collective, True)
            return work
        start, t0 = events(), sink.clock()
        start.record()
        work = fn(*args, **kwargs)
        if work is None:
            end = events()
            end.record()
            sink.span(collective, t0, start, end)
        else:
            sink.tag(work, collective, True)
        return work

    def wait(self, run: Callable[[], Any], collective: str, sink: WaitSink) -> Any:
        """``run()`` (a wait queued on the current stream), timed by events on that stream."""
        events = sink.events()
        if events is None:
            return run()
        start, t0 = events(), sink.clock()
        start.record()
        try:
            return run()
        finally:
            end = events()
            end.record()
            sink.span(collective, t0, start, end)

    def install(self, sink: WaitSink) -> Callable[[], None]:
        """Wrap the ``Stream`` class's ``record_event`` and ``wait_event`` (see the module); returns
        the undo."""
        cls = self.cuda.Stream
        record_event, wait_event = cls.record_event, cls.wait_event
        marked, tagged = self._marked, self._events

        def record(stream: Any, event: Any = None) -> Any:
            out = record_event(stream, event)
            collective = marked.get(stream) if marked else None
            if collective is not None:
                key = id(out)

                def forget(_: object) -> None:
                    tagged.pop(key, None)

                tagged[key] = (weakref.ref(out, forget), collective)
            return out

        def wait(stream: Any, event: Any) -> Any:
            entry = tagged.pop(id(event), None) if tagged else None
            if entry is None or entry[0]() is not event or stream != self.cuda.current_stream():
                return wait_event(stream, event)
            return self.wait(lambda: wait_event(stream, event), entry[1], sink)

        cls.record_event, cls.wait_event = record, wait

        def undo() -> None:
            cls.record_event, cls.wait_event = record_event, wait_event
            marked.clear()
            tagged.clear()

        return undo


def cuda_streams() -> Streams | None:
    """``torch.cuda``'s streams where CUDA is available, else None (no device waits to time)."""
    import torch

    return Streams(torch.cuda) if torch.cuda.is_available() else None
