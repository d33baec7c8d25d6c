"""Pending records, and the contract the compiled hot path shares with Python (in one place).

Recording is an append to the registry's pending buffer and nothing more; a drain
(``_drain.py``) later takes the whole buffer at one instant. ``perfkit/_speedups.c`` and
this module are two implementations of the same buffer; its header points here, and
``tests/test_buffer.py`` checks the names below against the C source. The contract:

* A record is three int64: ``node`` (``~node`` when the timed code raised), ``start``, ``end``,
  in nanoseconds of the registry's ``clock``.
* ``Registry`` derives from ``RegistryCore``: the C type where it is built, else
  ``PyRegistryCore`` below, with the same attributes (``CORE_ATTRIBUTES``). ``_buf`` is the
  Python path's pending records, a list of ints, three per record, appended with
  ``buf += (node, t0, t1)``; ``clock`` returns int nanoseconds; neither can be deleted.
  ``pending`` counts records not yet drained; ``_take_pending()`` takes them all.
* The C path keeps its records as packed int64 beside the list, and *marks* (packed record index,
  records on the list by then) each time the list grew since it last looked, so the drain puts
  each packed record back where it was made (``take_all``).
* Past ``DRAIN_AT`` pending ints the recording thread calls ``registry.drain()``; C calls it by
  the name ``DRAIN``.
* ``configure`` hands C what it reads of the registry module (``CONFIGURED``): the current
  registry's ``ContextVar``, ``DRAIN_AT``, and the clock it may read directly
  (``monotonic_ns``: ``CLOCK_MONOTONIC`` on Linux).
* Locks: recording takes none (a list extend, like C code that runs no Python code, is atomic
  under the GIL); ``_take_pending`` copies exactly what it saw and deletes exactly that, so
  appends racing with it land after. The registry's lock is Python's: drains, cursors and
  snapshots take it; C never does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

import numpy as np

from ._accel import SPEEDUPS
from ._clock import Clock
from ._ring import I64
from ._validate import salvage

DRAIN_AT = 3 * 4096
"""Pending ints (three per record) that trigger a drain on the recording thread."""
CORE_ATTRIBUTES = ("_buf", "clock", "pending", "_take_pending")
"""What ``RegistryCore`` defines in C and ``PyRegistryCore`` in Python."""
DRAIN = "drain"
"""The ``Registry`` method C calls past ``DRAIN_AT`` pending ints."""
CONFIGURED = ("registry_var", "drain_at", "perf_counter")
"""The keywords of ``configure`` that the registry module gives C."""


class PyRegistryCore:
    """What every record touches: the pending records and the clock (in C where it is built, which
    also keeps its own entry points' records, packed)."""

    __slots__ = ("_buf", "clock")

    _buf: list[int]
    clock: Clock

    def _take_pending(self) -> tuple[list[int], bytes, bytes]:
        """Every pending record, taken at one instant: the listed ints; the packed records (int64
        node, start, end) and their marks (int64 packed index, records listed from then on): none on
        this path."""
        buf = self._buf
        n = len(buf) - len(buf) % 3
        listed = buf[:n]
        del buf[:n]  # exactly those: appends racing with us land after them
        return listed, b"", b""

    @property
    def pending(self) -> int:
        """Records made and not yet drained."""
        return len(self._buf) // 3


if TYPE_CHECKING:
    RegistryCore = PyRegistryCore
else:
    RegistryCore = PyRegistryCore if SPEEDUPS is None else SPEEDUPS.RegistryCore


class Draining(Protocol):
    """A registry as the buffer sees it: its pending list, and the drain that empties it."""

    _buf: list[int]

    def drain(self) -> None: ...


def add_record(reg: Draining, node: int, t0: int, t1: int, *, failed: bool) -> None:
    """Append one record for an interned ``node``: what entry points do off their inlined hot path."""
    buf = reg._buf
    buf += (~node if failed else node, t0, t1)
    if len(buf) > DRAIN_AT:
        reg.drain()


def add_records(reg: Draining, records: list[int]) -> None:
    """Append flat ``(node, start, end, ...)`` records at once (a step and its parts): one append
    and one drain check for all of them."""
    buf = reg._buf
    buf += records
    if len(buf) > DRAIN_AT:
        reg.drain()


def take_all(core: PyRegistryCore) -> tuple[I64, int] | None:
    """Every pending record as flat int64 (node, start, end, ...) in the order made, and how many
    were dropped as unreadable; None when nothing is pending."""
    listed, packed, marks = core._take_pending()
    if not listed and not packed:
        return None
    bad = 0
    # A value numpy cannot read (None, a str, 2**64) sends the batch down the slow path.
    try:
        flat = np.fromiter(listed, dtype=np.int64, count=len(listed))
    except (TypeError, ValueError, OverflowError):
        good, bad = salvage(listed)
        flat = np.array(good, dtype=np.int64)
    if packed:
        flat = _merged(flat, np.frombuffer(packed, dtype=np.int64), np.frombuffer(marks, dtype=np.int64))
    return flat, bad


def _merged(listed: I64, packed: I64, marks: I64) -> I64:
    """The records of both paths in the order they were made. A mark (packed index, listed count)
    says that the packed records from that index on were made after that many listed ones; packed
    records before the first mark came before every listed one. (After a salvage dropped listed
    records with times that were not ints, the places are approximate.)"""
    if not len(marks):
        first: I64 = np.concatenate((packed, listed))
        return first
    rows, made = listed.reshape(-1, 3), packed.reshape(-1, 3)
    starts, counts = marks[0::2], marks[1::2]
    k = np.searchsorted(starts, np.arange(len(made)), side="right") - 1
    at = np.minimum(np.where(k >= 0, counts[np.maximum(k, 0)], 0), len(rows))
    flat: I64 = np.insert(rows, at, made, axis=0).reshape(-1)
    return flat
