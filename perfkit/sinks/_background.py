"""Sinks that talk to a network, kept off the training thread.

An MLflow server that does not answer makes its client retry for minutes; a W&B
process that hangs blocks ``run.log``. ``Background`` runs such a sink's calls on
a thread of its own, behind a bounded queue, so a window's ``emit`` is a queue
put (microseconds) whatever the network does. It owns the policy:

* the queue holds ``queue_size`` windows; past that, new windows are dropped;
* a call that fails, or runs past ``timeout_s``, is a failure; ``breaker_after``
  failures in a row open the circuit: for ``cooldown_s`` windows are dropped at
  once, then one is tried again;
* ``close()`` gives the queue ``flush_s`` to drain (none while the circuit is
  open), then counts what is left;

and says once what was lost (``lost`` counts it). At interpreter exit every open
queue is flushed the same way.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import queue
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

from .._validate import check_int, check_number
from .._warn import WarnOnce

log = logging.getLogger("perfkit")
_OPEN: weakref.WeakSet[Background] = weakref.WeakSet()
_STOP = object()


class Background:
    """Calls of one network sink on a thread of its own: bounded queue, timeout, circuit breaker.

    >>> sent = []
    >>> bg = Background("demo", timeout_s=1.0)
    >>> bg.submit(lambda: sent.append(1))
    True
    >>> bg.close(); sent, bg.lost
    ([1], 0)
    """

    def __init__(
        self,
        name: str,
        *,
        queue_size: int = 64,
        timeout_s: float = 10.0,
        flush_s: float = 5.0,
        breaker_after: int = 3,
        cooldown_s: float = 60.0,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.name = name
        self.timeout_s = check_number(timeout_s, "timeout_s", high=3600)
        self.flush_s = check_number(flush_s, "flush_s", high=3600)
        self.cooldown_s = check_number(cooldown_s, "cooldown_s", high=86_400)
        self.breaker_after = check_int(breaker_after, "breaker_after", low=1, high=1000)
        self._queue: queue.Queue[Any] = queue.Queue(check_int(queue_size, "queue_size", low=1, high=100_000))
        self._now = monotonic
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._busy_since: float | None = None
        self._failures = 0  # in a row
        self._open_until = -1.0
        self._closed = False
        self.lost = 0
        """Windows not delivered: dropped (queue full, circuit open), failed, or left at close."""
        self.reasons: dict[str, int] = {}
        self._warn = WarnOnce()
        _OPEN.add(self)

    def submit(self, call: Callable[[], object]) -> bool:
        """Queue ``call`` (never blocks); False when it was dropped, and then counted."""
        now = self._now()
        busy = self._busy_since
        if busy is not None and now - busy > self.timeout_s and now >= self._open_until:
            self._trip(f"a call has run for {now - busy:.1f} s (timeout_s={self.timeout_s:g})")
        if self._closed:
            return self._drop("closed")
        if now < self._open_until:
            return self._drop("circuit open")
        try:
            self._queue.put_nowait(call)
        except queue.Full:
            return self._drop(f"queue full ({self._queue.maxsize} windows)")
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name=f"perfkit-{self.name}", daemon=True)
                self._thread.start()
        return True

    def flush(self, timeout_s: float | None = None) -> bool:
        """Wait at most ``timeout_s`` (default ``flush_s``) for the queue to drain; True if it did."""
        limit = self.flush_s if timeout_s is None else timeout_s
        deadline = time.monotonic() + limit
        while self._queue.unfinished_tasks and self._now() >= self._open_until:
            busy = self._busy_since
            if busy is not None and self._now() - busy > self.timeout_s:
                self._trip(f"a call has run for {self._now() - busy:.1f} s (timeout_s={self.timeout_s:g})")
                return False
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            with self._queue.all_tasks_done:
                if self._queue.unfinished_tasks:
                    self._queue.all_tasks_done.wait(min(left, 0.05))
        return not self._queue.unfinished_tasks

    def close(self) -> None:
        """Flush (bounded by ``flush_s``), stop the thread, count and say what could not be sent."""
        if self._closed:
            return
        self.flush()
        with self._lock:
            self._closed = True
            in_flight = self._busy_since is not None  # not known to have arrived
        left = 0
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            if item is not _STOP:
                left += 1
            self._queue.task_done()
        if left:
            self._count(f"not sent within flush_s={self.flush_s:g} s at the end", left)
        if in_flight:
            self._count("in flight at the end", 1)
        with contextlib.suppress(queue.Full):  # the thread is stuck: a daemon, left behind
            self._queue.put_nowait(_STOP)
        if self.lost:
            text = ", ".join(f"{n} {why}" for why, n in self.reasons.items())
            message = f"perfkit: {self.name}: {self.lost} window(s) were not delivered ({text})"
            log.warning(message)
            self._warn("lost", message)
        _OPEN.discard(self)

    # ---- the thread ---------------------------------------------------------------------------

    def _run(self) -> None:
        while True:
            call = self._queue.get()
            try:
                if call is _STOP:
                    return
                if self._now() < self._open_until:
                    self._drop("circuit open")
                    continue
                self._call(call)
            finally:
                self._queue.task_done()

    def _call(self, call: Callable[[], object]) -> None:
        start = self._busy_since = self._now()
        error: Exception | None = None
        try:
            call()
        except Exception as exc:  # a server that is down must not stop training
            error = exc
        with self._lock:  # close() decides under the same lock whether this call is still in flight
            self._busy_since = None
            if self._closed:
                return
        if error is not None:
            self._fail(f"failed: {type(error).__name__}", f"{error!r}"[:300])
            return
        took = self._now() - start
        if took > self.timeout_s:
            self._fail("slow", f"a call took {took:.0f} s (timeout_s={self.timeout_s:g})", counted=False)
        else:
            self._failures = 0

    def _fail(self, why: str, detail: str, *, counted: bool = True) -> None:
        if counted:
            self._count(why, 1)
        self._warn(why, f"perfkit: {self.name}: {detail}; training goes on (said once per kind)")
        self._failures += 1
        if self._failures >= self.breaker_after:
            self._trip(f"{self._failures} failures in a row")

    def _trip(self, why: str) -> None:
        self._open_until = self._now() + self.cooldown_s
        self._warn(
            "breaker",
            f"perfkit: {self.name}: {why}; windows are dropped and counted for {self.cooldown_s:g} s, "
            "then one is tried again (said once)",
        )

    def _drop(self, why: str) -> bool:
        self._count(why, 1)
        return False

    def _count(self, why: str, n: int) -> None:
        with self._lock:
            self.lost += n
            self.reasons[why] = self.reasons.get(why, 0) + n


@atexit.register
def _flush_at_exit() -> None:
    for bg in list(_OPEN):
        bg.close()
