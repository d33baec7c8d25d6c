"""A registry's mailbox: records on their way to or from another process.

In a DataLoader worker the registry *forwards*: drained records wait in the outbox, bounded,
until the worker ships them with a batch (``Registry.take_records``). In the main process,
batches from workers wait in the inbox until the next drain interns their nodes
(``_transfer.unpack``) and ingests them. Receiving takes no lock, so a pin-memory thread never
waits on a snapshot; the drain, under the registry's lock, empties the inbox.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ._dropped import INVALID, Losses
from ._ring import I64, Bools
from ._transfer import RecordBatch, pack, unpack

OUTBOX_MAX = 256 * 1024
"""Records a forwarding registry (in a DataLoader worker) holds before it drops the newest."""


class Mailbox:
    """A registry's records in transit: an outbox while it forwards (in a worker), an inbox of
    batches received from workers (in the main process), and what was dropped on the way."""

    __slots__ = ("_dropped", "_kept", "_max", "dropped_in", "inbox", "outbox")

    def __init__(self) -> None:
        self.outbox: list[tuple[I64, I64, I64, Bools]] | None = None
        self._kept = 0
        self._dropped = 0
        self._max = OUTBOX_MAX
        self.inbox: list[RecordBatch] = []
        self.dropped_in = 0
        """Records the senders of received batches had to drop (exact, since the start)."""

    def forward(self, max_records: int) -> None:
        self.outbox, self._max = [], max_records

    def keep(self, nodes: I64, starts: I64, durations: I64, errors: Bools) -> None:
        """Hold drained columns for the next ``take``; past the limit, drop the newest and count them."""
        assert self.outbox is not None
        room = max(0, self._max - self._kept)
        n = len(nodes)
        if n > room:  # the main process is not reading
            self._dropped += n - room
            n = room
        if n:
            self.outbox.append((nodes[:n], starts[:n], durations[:n], errors[:n]))
            self._kept += n

    def take(self) -> RecordBatch | None:
        """The held records as one batch ready to travel; None when there is nothing."""
        if not self.outbox and not self._dropped:
            return None
        held = self.outbox or [(np.zeros(0, np.int64),) * 3 + (np.zeros(0, np.bool_),)]
        batch = pack(*(np.concatenate([c[i] for c in held]) for i in range(4)), dropped=self._dropped)
        self.outbox = []
        self._kept = self._dropped = 0
        return batch

    def received(self) -> list[RecordBatch]:
        """The batches received so far, counting their drops; appends racing with us are kept for later."""
        n = len(self.inbox)
        batches = self.inbox[:n]
        del self.inbox[:n]
        self.dropped_in += sum(b.dropped for b in batches if isinstance(b.dropped, int) and b.dropped > 0)
        return batches

    def deliver(self, ingest: Callable[[I64, I64, I64, Bools], None], lost: Losses) -> None:
        """Ingest every batch received so far; a batch that does not hold together is dropped
        whole and counted, and drops the senders reported are said once."""
        before = self.dropped_in
        for batch in self.received():
            try:
                nodes = unpack(batch)
            except ValueError as exc:  # a batch that does not hold together: none of it enters
                lost.add(INVALID, len(batch.nodes), f"a worker's batch: {exc}")
                continue
            if len(nodes):
                ingest(nodes, batch.starts, batch.durations, batch.errors)
        if self.dropped_in > before:
            lost.said(
                "transfer",
                f"perfkit: DataLoader workers dropped {self.dropped_in - before:,} records they could "
                f"not hand over (more than {OUTBOX_MAX:,} per batch); counted in "
                "snapshot.dropped_in_transfer and the report (said once)",
            )
