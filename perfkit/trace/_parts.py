"""Which part of a step a trace range marks, where the mark came from, and how a step splits into parts.

Marks are recognised from five sources, in this order of trust (a tie between marks with the
same bounds goes to the more trusted):

==================  ==========================================================================
``perfkit``         perfkit's own ranges (``perfkit.part.forward`` ...)
``user annotation`` a user's ``record_function`` range (or any ``## name ##`` range) with one of
                    the words of ``ANNOTATION_WORDS``: ``## forward ##``, ``## data_load ##``,
                    ``[param|alex_net|measure|forward]``
``Lightning``       ``[pl][profile]...training_step``, ``...backward``, ``...optimizer_step`` ...
``torch``           ``enumerate(DataLoader)#...``, ``Optimizer.step#...``, ``Optimizer.zero_grad#...``,
                    ``DistributedDataParallel.forward``, backward ops (``autograd::engine::...``,
                    ``...Backward0``) run on the main thread
``autograd thread`` the time the autograd engine's own threads are busy: backward
==================  ==========================================================================

Every instant of a step goes to the innermost mark covering it, so a backward run inside an
optimizer-step closure counts as backward. What no mark covers is *other*: torch marks no
forward pass, so without a forward mark the forward is other (or optimizer time, inside
``Optimizer.step``'s closure as Lightning runs it).

    >>> classify("perfkit.part.backward"), classify("Optimizer.step#SGD.step"), classify("aten::mm")
    ((2, 4), (3, 1), None)
    >>> classify("## forward:over_arch ##", annotation=True)
    (1, 3)
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Iterable, Iterator, Sequence

import numpy as np

from ..names import MARK_BACKWARD, MARK_DATA_WAIT, MARK_FORWARD, MARK_OPTIMIZER, TRACE_PARTS

Mark = tuple[float, float, int]  # start µs, end µs, code (see pack)
# The parts a mark can give, by index; the last of ALL_PARTS, "other", is what no mark covers.
ALL_PARTS = TRACE_PARTS
PARTS = ALL_PARTS[:-1]
DATA_WAIT, FORWARD, BACKWARD, OPTIMIZER = range(4)
# Mark sources, in order of trust: higher wins a tie.
AUTOGRAD, TORCH, LIGHTNING, ANNOTATION, PERFKIT = range(5)
SOURCES = ("autograd thread", "torch", "Lightning", "user annotation", "perfkit")

PERFKIT_MARKS = {
    MARK_DATA_WAIT: DATA_WAIT,
    MARK_FORWARD: FORWARD,
    MARK_BACKWARD: BACKWARD,
    MARK_OPTIMIZER: OPTIMIZER,
}
_LIGHTNING_PROFILE = "[pl][profile]"
# Lightning names an action "[pl][profile]" + "[Owner]Class.hook" or a bare hook name; hooks such
# as on_before_backward or on_before_optimizer_step are callbacks around a part, not the part.
_LIGHTNING_RULES = (
    (re.compile(r"\[_\w+Loop\]\.\w*_next$"), DATA_WAIT),  # train_dataloader_next, val_next
    (re.compile(r"[.\]](training|validation|test|predict)_step$"), FORWARD),
    (re.compile(r"[.\]]backward$"), BACKWARD),
    (re.compile(r"[.\]]optimizer_(step|zero_grad)$"), OPTIMIZER),
)
_TORCH_PREFIXES = (
    ("enumerate(DataLoader)#", DATA_WAIT),
    ("autograd::engine::", BACKWARD),
    ("Optimizer.step#", OPTIMIZER),
    ("Optimizer.zero_grad#", OPTIMIZER),
    ("DistributedDataParallel.forward", FORWARD),
)
# An autograd node's own range: "AddmmBackward0", older "CudnnBatchNormBackward", "CopyBackwards".
BACKWARD_OP = re.compile(r"Backwards?\d*$")
# A user annotation marks a part when one of its words (runs of letters, digits and "_") is one of
# these; the first part that matches wins. "## forward:over_arch ##" is forward, "## alltoall_fwd ##"
# and "## sparse_data_dist ##" mark no part.
ANNOTATION_WORDS = (
    (DATA_WAIT, frozenset({"data_load", "data_loading", "dataloader", "load_batch", "next_batch"})),
    (DATA_WAIT, frozenset({"get_batch", "fetch_batch", "wait_for_batch", "wait_for_training_batch"})),
    (DATA_WAIT, frozenset({"copy_batch_to_gpu"})),
    (OPTIMIZER, frozenset({"optimizer", "optimizer_step", "optim", "zero_grad"})),
    (BACKWARD, frozenset({"backward"})),
    (FORWARD, frozenset({"forward"})),
)
_WORD = re.compile(r"[a-z0-9_]+")


def classify(name: str, *, annotation: bool = False) -> tuple[int, int] | None:
    """``(part index, source)`` of a range name, or None when it marks no part.

    ``annotation``: the range is a user annotation, so its words may name a part.
    """
    part = PERFKIT_MARKS.get(name)
    if part is not None:
        return part, PERFKIT
    if name.startswith(_LIGHTNING_PROFILE):
        for pattern, part in _LIGHTNING_RULES:
            if pattern.search(name, len(_LIGHTNING_PROFILE) - 1):  # from the "]"
                return part, LIGHTNING
        return None
    if name.startswith("[pl][module]"):  # a submodule's forward, wrapped by Lightning's profiler
        return FORWARD, LIGHTNING
    for prefix, part in _TORCH_PREFIXES:
        if name.startswith(prefix):
            return part, TORCH
    if annotation or name.startswith("##"):  # older torch wrote user ranges as ops
        words = set(_WORD.findall(name.lower()))
        return next(((part, ANNOTATION) for part, known in ANNOTATION_WORDS if words & known), None)
    if BACKWARD_OP.search(name):
        return BACKWARD, TORCH
    return None


def pack(part: int, source: int, name_id: int) -> int:
    """One integer code for a mark: what it marks, where it came from, its name."""
    return (name_id * len(SOURCES) + source) * len(PARTS) + part


def unpack(code: int) -> tuple[int, int, int]:
    """``(part, source, name id)`` of a :func:`pack` code."""
    return code % len(PARTS), code // len(PARTS) % len(SOURCES), code // (len(PARTS) * len(SOURCES))


def split_parts(
    marks: Iterable[Mark], windows: Sequence[tuple[float, float]]
) -> tuple[np.ndarray, dict[int, float]]:
    """µs of each part inside each window (shape ``(len(windows), len(PARTS))``) and µs per mark code.

    ``marks`` are ``(start, end, code)``, sorted by start, outer marks first, then by source;
    ``windows`` are sorted and disjoint.
    """
    out = np.zeros((len(windows), len(PARTS)))
    by_code: dict[int, float] = {}
    first = 0
    for a, b, code in _innermost(marks):
        while first < len(windows) and windows[first][1] <= a:
            first += 1
        w = first
        while w < len(windows) and windows[w][0] < b:
            overlap = min(b, windows[w][1]) - max(a, windows[w][0])
            if overlap > 0:
                out[w, code % len(PARTS)] += overlap
                by_code[code] = by_code.get(code, 0.0) + overlap
            w += 1
    return out, by_code


def _innermost(marks: Iterable[Mark]) -> Iterator[Mark]:
    """``(start, end, code)`` pieces of time, in order, each owned by the innermost open mark.

    The innermost open mark is the latest started that has not ended. Marks that overlap
    without nesting are tolerated: ended marks leave the stack lazily, and the next boundary
    comes from a heap of the open marks' ends. Iterative: any depth of nesting.
    """
    stack: list[_Open] = []  # open marks, latest started on top
    open_ends: list[float] = []
    rows = iter(marks)
    nxt = next(rows, None)
    t = nxt[0] if nxt is not None else 0.0
    while nxt is not None or open_ends:
        next_start = nxt[0] if nxt is not None else float("inf")
        t_next = min(next_start, open_ends[0]) if open_ends else next_start
        while stack and stack[-1].end <= t:
            stack.pop()
        if stack and t_next > t:
            yield t, t_next, stack[-1].code_at(t)
        t = t_next
        while open_ends and open_ends[0] <= t:
            heapq.heappop(open_ends)
        while nxt is not None and nxt[0] <= t:
            while stack and stack[-1].end <= t:
                stack.pop()
            stack.append(_Open(nxt[1], nxt[2], stack[-1] if stack else None, t))
            heapq.heappush(open_ends, nxt[1])
            nxt = next(rows, None)


class _Open:
    """An open mark, and whose time it is while the mark around it lasts.

    Nested in a mark of the same part that is at least as trusted, its time is the outer mark's
    (``DistributedDataParallel.forward`` inside ``## forward ##`` is the annotation's forward),
    but only until that one ends; then it is its own again.
    """

    __slots__ = ("code", "credit", "end", "until")

    def __init__(self, end: float, code: int, outer: _Open | None, t: float) -> None:
        self.end, self.code, self.credit, self.until = end, code, code, t
        if outer is not None:
            around = outer.code_at(t)
            (p_out, s_out, _), (p_in, s_in, _) = unpack(around), unpack(code)
            if p_out == p_in and s_out >= s_in:
                self.credit, self.until = around, outer.until if t < outer.until else outer.end

    def code_at(self, t: float) -> int:
        return self.credit if t < self.until else self.code
