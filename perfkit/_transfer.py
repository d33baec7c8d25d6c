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
from ._ring import I64, Bools


@dataclass(frozen=True, eq=False)
class RecordBatch:
    """Columns of records plus what the receiver needs to rebuild their nodes.

    ``nodes[i]`` indexes ``paths``; ``paths[j]`` is (index into ``threads``, names from the
    outermost section down). ``dropped`` counts records the sender had to drop.
    """

    threads: tuple[ThreadInfo, ...]
    paths: tuple[tuple[int, tuple[str, ...]], ...]
    overlay: tuple[str, ...]
    nodes: I64
    starts: I64
    durations: I64
    errors: Bools
    dropped: int

    def __len__(self) -> int:
        return len(self.nodes)


def pack(nodes: I64, starts: I64, durations: I64, errors: Bools, dropped: int) -> RecordBatch:
    """Describe this process's ``nodes`` by thread and path, for another process."""
    uniq, local = np.unique(nodes, return_inverse=True)
    threads: list[ThreadInfo] = []
    thread_index: dict[int, int] = {}
    paths = []
    for node in uniq.tolist():
        root = NODES.roots[node]
        ti = thread_index.get(root)
        if ti is None:
            ti = thread_index[root] = len(threads)
            threads.append(NODES.threads[root])
        paths.append((ti, NODES.path(node)))
    names = {name for _, path in paths for name in path}
    return RecordBatch(
        threads=tuple(threads),
        paths=tuple(paths),
        overlay=tuple(sorted(names & NODES.overlay)),
        nodes=local.reshape(-1).astype(np.int64),
        starts=starts,
        durations=durations,
        errors=errors,
        dropped=dropped,
    )


def unpack(batch: RecordBatch) -> I64:
    """This process's nodes for ``batch``'s records, interning the ones it has not seen."""
    NODES.overlay.update(batch.overlay)
    roots = [NODES.root(t) for t in batch.threads]
    local = np.empty(len(batch.paths), dtype=np.int64)
    for j, (ti, path) in enumerate(batch.paths):
        node = roots[ti]
        for name in path:
            node = NODES.child(node, name)
        local[j] = node
    mapped: I64 = local[batch.nodes]
    return mapped
