"""Records that travel between processes (DataLoader workers to the main process).

Nodes are ints interned per process, so a batch of records carries, for each
node it uses, the node's thread and path of names; the receiving process
interns them into its own table. A batch is self-contained: one that is lost
(a prefetched batch dropped at the end of an epoch) breaks no other.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._context import NODES, ThreadInfo
from ._cursor import ThreadTable
from ._ring import I64, Bools


@dataclass(frozen=True, eq=False)
class RecordBatch:
    """Columns of records plus what the receiver needs to rebuild their nodes.

    ``nodes[i]`` indexes ``paths``; ``paths[j]`` is (index into ``threads``, names from the
    outermost section down); ``overlay`` lists the paths whose node stays out of the section
    tree. ``dropped`` counts records the sender had to drop.
    """

    threads: tuple[ThreadInfo, ...]
    paths: tuple[tuple[int, tuple[str, ...]], ...]
    overlay: tuple[int, ...]
    nodes: I64
    starts: I64
    durations: I64
    errors: Bools
    dropped: int

    def __len__(self) -> int:
        return len(self.nodes)


def pack(nodes: I64, starts: I64, durations: I64, errors: Bools, *, dropped: int) -> RecordBatch:
    """Describe this process's ``nodes`` by thread and path, for another process."""
    uniq, local = np.unique(nodes, return_inverse=True)
    threads = ThreadTable()
    paths = [(threads.index_of_root(NODES.roots[node]), NODES.path(node)) for node in uniq.tolist()]
    flags = NODES.overlay
    return RecordBatch(
        threads=tuple(threads.infos),
        paths=tuple(paths),
        overlay=tuple(j for j, node in enumerate(uniq.tolist()) if flags[node]),
        nodes=local.reshape(-1).astype(np.int64),
        starts=starts,
        durations=durations,
        errors=errors,
        dropped=dropped,
    )


def unpack(batch: RecordBatch) -> I64:
    """This process's nodes for ``batch``'s records, interning the ones it has not seen.

    Raises ``ValueError`` when the batch does not hold together (columns of unequal length,
    an index out of range): the receiver then drops the whole batch and counts it.
    """
    check_batch(batch)
    roots = [NODES.root(t) for t in batch.threads]
    local = np.empty(len(batch.paths), dtype=np.int64)
    overlay = set(batch.overlay)
    for j, (ti, path) in enumerate(batch.paths):
        node = roots[ti]
        for depth, name in enumerate(path, 1):
            node = NODES.child(node, name, overlay=depth == len(path) and j in overlay)
        local[j] = node
    mapped: I64 = local[batch.nodes]
    return mapped


def check_batch(batch: RecordBatch) -> None:
    """That ``batch`` can be read: one length for its columns, indexes in range, names that are str."""
    n = len(batch.nodes)
    columns = (batch.nodes, batch.starts, batch.durations, batch.errors)
    if any(not isinstance(c, np.ndarray) or c.ndim != 1 or len(c) != n for c in columns):
        raise ValueError(f"columns of unequal length or shape (nodes: {n} records)")
    if n and (int(batch.nodes.min()) < 0 or int(batch.nodes.max()) >= len(batch.paths)):
        raise ValueError(f"a node index outside the {len(batch.paths)} paths")
    for ti, path in batch.paths:
        if not 0 <= ti < len(batch.threads) or not all(isinstance(p, str) and p for p in path):
            raise ValueError(f"a path with a bad thread index or name: {(ti, path)!r}"[:200])
    if n and int(batch.durations.min()) < 0:
        raise ValueError("a negative duration")
