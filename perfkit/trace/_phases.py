"""Which training phase a trace range marks, and how a thread's time splits between phases.

Three sources of marks are recognised, in this priority: perfkit's own ranges
(``perfkit.phase.forward`` ...), Lightning's profiler ranges (``[pl][profile]...training_step``)
and torch's own (``enumerate(DataLoader)#...``, ``autograd::engine::...``, ``Optimizer.step#...``).
Every instant of a window goes to the innermost mark covering it, so a backward run inside an
optimizer-step closure counts as backward; the priority only breaks ties between marks with
the same bounds. torch marks no forward pass: without a perfkit (or Lightning) forward mark,
a forward run inside ``Optimizer.step``'s closure (Lightning's automatic optimization) counts
as optimizer time, and a forward outside any mark as unaccounted.

    >>> classify("perfkit.phase.backward"), classify("Optimizer.step#SGD.step"), classify("aten::mm")
    ((2, 3), (3, 1), None)
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Iterable, Iterator, Sequence

import numpy as np

from ..names import MARK_BACKWARD, MARK_DATA, MARK_FORWARD, MARK_OPTIMIZER

Mark = tuple[float, float, int]  # start µs, end µs, code
# Phase indices; "unaccounted" is what no mark covers.
PHASES = ("data_loading", "forward", "backward", "optimizer")
ALL_PHASES = (*PHASES, "unaccounted")
DATA_LOADING, FORWARD, BACKWARD, OPTIMIZER = range(4)
# Mark sources, higher wins a tie.
TORCH, LIGHTNING, PERFKIT = 1, 2, 3

PERFKIT_MARKS = {
    MARK_DATA: DATA_LOADING,
    MARK_FORWARD: FORWARD,
    MARK_BACKWARD: BACKWARD,
    MARK_OPTIMIZER: OPTIMIZER,
}
_LIGHTNING_PROFILE = "[pl][profile]"
# Lightning names an action "[pl][profile]" + "[Owner]Class.hook" or a bare hook name; hooks such
# as on_before_backward or on_before_optimizer_step are callbacks around a phase, not the phase.
_LIGHTNING_RULES = (
    (re.compile(r"\[_\w+Loop\]\.\w*_next$"), DATA_LOADING),  # train_dataloader_next, val_next
    (re.compile(r"[.\]](training|validation|test|predict)_step$"), FORWARD),
    (re.compile(r"[.\]]backward$"), BACKWARD),
    (re.compile(r"[.\]]optimizer_(step|zero_grad)$"), OPTIMIZER),
)
_TORCH_PREFIXES = (
    ("enumerate(DataLoader)#", DATA_LOADING),
    ("autograd::engine::", BACKWARD),
    ("Optimizer.step#", OPTIMIZER),
    ("Optimizer.zero_grad#", OPTIMIZER),
)


def classify(name: str) -> tuple[int, int] | None:
    """``(phase index, source)`` of a range name, or None when it marks no phase."""
    phase = PERFKIT_MARKS.get(name)
    if phase is not None:
        return phase, PERFKIT
    if name.startswith(_LIGHTNING_PROFILE):
        for pattern, phase in _LIGHTNING_RULES:
            if pattern.search(name, len(_LIGHTNING_PROFILE) - 1):  # from the "]"
                return phase, LIGHTNING
        return None
    if name.startswith("[pl][module]"):  # a submodule's forward, wrapped by Lightning's profiler
        return FORWARD, LIGHTNING
    for prefix, phase in _TORCH_PREFIXES:
        if name.startswith(prefix):
            return phase, TORCH
    return None


def split_phases(marks: Iterable[Mark], windows: Sequence[tuple[float, float]]) -> np.ndarray:
    """µs of each phase inside each window: shape ``(len(windows), len(PHASES))``.

    ``marks`` are ``(start, end, phase + len(PHASES) * source)``, sorted by start, outer marks
    first, then by source; ``windows`` are sorted and disjoint.
    """
    out = np.zeros((len(windows), len(PHASES)))
    first = 0
    for a, b, phase in _innermost(marks):
        while first < len(windows) and windows[first][1] <= a:
            first += 1
        w = first
        while w < len(windows) and windows[w][0] < b:
            overlap = min(b, windows[w][1]) - max(a, windows[w][0])
            if overlap > 0:
                out[w, phase % len(PHASES)] += overlap
            w += 1
    return out


def _innermost(marks: Iterable[Mark]) -> Iterator[Mark]:
    """``(start, end, code)`` pieces of time, in order, each owned by the innermost open mark.

    The innermost open mark is the latest started that has not ended. Marks that overlap
    without nesting are tolerated: ended marks leave the stack lazily, and the next boundary
    comes from a heap of the open marks' ends.
    """
    stack: list[tuple[float, int]] = []  # (end, code) of open marks, latest started on top
    open_ends: list[float] = []
    rows = iter(marks)
    nxt = next(rows, None)
    t = nxt[0] if nxt is not None else 0.0
    while nxt is not None or open_ends:
        next_start = nxt[0] if nxt is not None else float("inf")
        t_next = min(next_start, open_ends[0]) if open_ends else next_start
        while stack and stack[-1][0] <= t:
            stack.pop()
        if stack and t_next > t:
            yield t, t_next, stack[-1][1]
        t = t_next
        while open_ends and open_ends[0] <= t:
            heapq.heappop(open_ends)
        while nxt is not None and nxt[0] <= t:
            stack.append((nxt[1], nxt[2]))
            heapq.heappush(open_ends, nxt[1])
            nxt = next(rows, None)
