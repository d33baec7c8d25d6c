"""Chrome trace output: the retained records as complete ("X") events (``perfkit.write_chrome_trace``).

One row per thread (a process per OS process, named "main" or "worker N"), so
nested sections show as a flame chart in ``chrome://tracing`` and Perfetto.
The events are streamed one per line, sorted by start, parents before children.
"""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path
from typing import IO, Any

import numpy as np

from .._registry import Registry
from .._snapshot import Snapshot


def write_chrome_trace(path: str | os.PathLike[str], source: Snapshot | Registry) -> Path:
    """Write ``source``'s retained records as a Chrome trace (gzip when ``path`` ends in ``.gz``).

    >>> import perfkit, tempfile, os
    >>> reg = perfkit.Registry()
    >>> with perfkit.section("load", registry=reg):
    ...     pass
    >>> out = write_chrome_trace(os.path.join(tempfile.mkdtemp(), "t.json"), reg)
    >>> out.suffix
    '.json'
    """
    snap = source.snapshot() if isinstance(source, Registry) else source
    if not isinstance(snap, Snapshot):
        raise TypeError(f"source must be a perfkit.Snapshot or Registry, got {source!r}")
    out = Path(path)
    opener = gzip.open if out.name.endswith(".gz") else open
    with opener(out, "wt", encoding="utf-8") as fh:
        _write(fh, snap)
    return out


def _write(fh: IO[str], snap: Snapshot) -> None:
    fh.write('{"displayTimeUnit": "ms", "otherData": {"producer": "perfkit"}, "traceEvents": [\n')
    first = True
    for meta in _metadata(snap):
        fh.write(("" if first else ",\n") + json.dumps(meta))
        first = False
    names: list[str] = []
    cols: list[tuple[Any, ...]] = []
    for name in snap:
        d = snap.data(name)
        names.append(name)
        cols.append(
            (
                d.starts_ns,
                d.durations_ns,
                d.threads,
                d.sample_errors,
                np.full(len(d.starts_ns), len(names) - 1),
            )
        )
    if cols:
        starts, durations, threads, errors, name_idx = (np.concatenate(c) for c in zip(*cols, strict=False))
        for i in np.lexsort((-durations, starts)).tolist():
            thread = snap.threads[int(threads[i])]
            event: dict[str, Any] = {
                "name": names[int(name_idx[i])],
                "cat": "perfkit",
                "ph": "X",
                "ts": int(starts[i]) / 1000,
                "dur": int(durations[i]) / 1000,
                "pid": thread.pid,
                "tid": thread.tid,
            }
            if errors[i]:
                event["args"] = {"error": True}
            fh.write(("" if first else ",\n") + json.dumps(event))
            first = False
    fh.write("\n]}\n")


def _metadata(snap: Snapshot) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    seen_pids: set[int] = set()
    for t in snap.threads:
        if t.pid not in seen_pids:
            seen_pids.add(t.pid)
            label = f"worker {t.worker}" if t.worker is not None else "main"
            events.append(
                {"name": "process_name", "ph": "M", "pid": t.pid, "args": {"name": f"{label} (pid {t.pid})"}}
            )
        events.append(
            {"name": "thread_name", "ph": "M", "pid": t.pid, "tid": t.tid, "args": {"name": t.name}}
        )
    return events
