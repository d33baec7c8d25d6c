"""The collectives in a stage epoch's account: each rank's exposed waits, by step part and by collective.

``perfkit.torch.time_collectives`` records each collective's exposed wait as
``dist.wait.PART.COLLECTIVE`` and its bytes as a sample of ``dist.bytes.COLLECTIVE``; this reads
them back into the account's subjects (``COLLECTIVE_SUBJECTS``):

=====================  ===============================================================
``collective_wait``    seconds by where the rank waited: a step part (``forward``,
                       ``backward``, ``optimizer``, ``zero_grad``, ``rest``) or ``outside``
``collectives``        the same seconds by collective (``all_gather``, ``reduce_scatter``, ...)
``collective_bytes``   bytes by collective: what the rank's calls moved (a DDP bucket's too)
``collective_calls``   calls by collective
=====================  ===============================================================

The waits inside steps are the account's overlay ``collective_wait``: the part of ``step`` the rank
was held by collectives, so a step part less its wait is the rank's own compute in it.

>>> import perfkit
>>> reg = perfkit.Registry()
>>> t = reg.clock()
>>> reg.record("dist.wait.forward.all_gather", t, t + 2_000_000)
>>> reg.gauge("dist.bytes.all_gather", 4096.0)
>>> subjects = collective_subjects(reg.snapshot())
>>> subjects["collective_wait"], subjects["collective_bytes"], in_steps(subjects)
({'forward': 0.002}, {'all_gather': 4096.0}, 0.002)
"""

from __future__ import annotations

from collections.abc import Mapping

from .._snapshot import Snapshot
from ..names import DIST_BYTES, OUTSIDE, collective_of

WAIT_BY_PART = "collective_wait"
WAIT_BY_COLLECTIVE = "collectives"
BYTES = "collective_bytes"
CALLS = "collective_calls"
COLLECTIVE_SUBJECTS = (WAIT_BY_PART, WAIT_BY_COLLECTIVE, BYTES, CALLS)
"""The account's subjects that hold a stage epoch's collectives (see the module)."""


def collective_subjects(snapshot: Snapshot) -> dict[str, dict[str, float]]:
    """The collectives' subjects of one rank's window (empty where none was timed)."""
    by_part: dict[str, float] = {}
    by_collective: dict[str, float] = {}
    for name in snapshot:
        where = collective_of(name)
        if where is None:
            continue
        part, collective = where
        seconds = snapshot[name].total_s
        by_part[part] = by_part.get(part, 0.0) + seconds
        by_collective[collective] = by_collective.get(collective, 0.0) + seconds
    moved: dict[str, float] = {}
    calls: dict[str, float] = {}
    for name in snapshot.gauges:
        if name.startswith(DIST_BYTES + "."):
            data = snapshot.gauge_data(name)
            collective = name[len(DIST_BYTES) + 1 :]
            moved[collective], calls[collective] = data.total, float(data.count)
    if not (by_part or moved):
        return {}
    found = (by_part, by_collective, moved, calls)
    return {k: v for k, v in zip(COLLECTIVE_SUBJECTS, found, strict=True) if v}


def in_steps(subjects: Mapping[str, Mapping[str, float]]) -> float | None:
    """The seconds of the collectives' waits inside steps (None where no wait was timed)."""
    by_part = subjects.get(WAIT_BY_PART)
    if not by_part:
        return None
    return sum(s for part, s in by_part.items() if part != OUTSIDE)
