"""A step's parts: forward, backward, the optimizer step and zero_grad, each second counted once.

Whoever sees a part begin and end tells the recorder (``StageRecorder.part_begin`` / ``part_end``):
Lightning's profiler actions, torch's global optimizer-step hooks, a wrapped
``torch.autograd.backward`` (``perfkit.torch.time_step_parts``). Parts nest -- Lightning's closure
runs ``training_step`` and ``backward`` inside ``optimizer_step``; a manual-optimization
``training_step`` holds its own backward and optimizer step -- and each second belongs to the
innermost open part: an outer part's own time leaves out the parts inside it, so nothing is
counted twice. Another component's hook inside a part (a callback's ``on_before_optimizer_step``)
is that component's time, not the part's. The same part reported twice at once (a profiler
action and a torch hook around one backward) is one part.

Where nobody said where forward was (a plain loop: torch has no global forward hook worth its
cost per module call), a step's forward is what came before its first backward or optimizer step:
the forward pass and the loss, less a ``zero_grad`` run before them. Most scripts call
``optimizer.zero_grad()`` first, then the model: forward taken as what came before the first part
of any kind was the few microseconds before ``zero_grad``, the forward pass went to ``rest``, and
SLOW_BACKWARD read a 44x backward as "2801.6x its forward" (``tests/test_run_step_parts.py``).
A step with no backward or optimizer step keeps what came before its first part. A step with no
part at all (an evaluation step, whose own time is its forward) is not split. What no part claims
is the step's rest (the loop's own code, gradient clipping, a callback's work inside the closure
that is not a hook).

>>> p = StepParts()
>>> p.begin("optimizer", 10); p.begin("forward", 12); p.end("forward", 20); p.end("optimizer", 25)
>>> p.close(now=30, step_start=0, step_ns=30)  # the optimizer's own: 2 before forward, 5 after
{'forward': 8, 'optimizer': 7}
>>> p.begin("zero_grad", 1); p.end("zero_grad", 3); p.begin("backward", 20); p.end("backward", 28)
>>> p.close(now=30, step_start=0, step_ns=30)  # zero_grad first: forward is 0 to 1 and 3 to 20
{'forward': 18, 'zero_grad': 2, 'backward': 8}
"""

from __future__ import annotations

from typing import Any

from ..names import FORWARD, REST, ZERO_GRAD


class StepParts:
    """The parts of the step that is open: which are open now, and each one's own time so far.

    ``begin`` and ``end`` run inside the user's step, three or more times a step: each open part
    is one list ``[part, since, own ns, depth]`` mutated in place, no object made past the part's
    first call (``benchmarks/bench_step_parts.py``)."""

    __slots__ = ("_open", "compute_at", "first_at", "own", "zeroed_before")

    def __init__(self) -> None:
        self._open: list[list[Any]] = []  # [part, since, own ns, depth], innermost last
        self.own: dict[str, int] = {}
        self.first_at: int | None = None  # when the step's first part began
        self.compute_at: int | None = None  # when its first part other than zero_grad began
        self.zeroed_before = 0  # the parts' own ns before then: a zero_grad run before the forward

    def begin(self, part: str, now: int) -> None:
        """``part`` begins at ``now``; an open outer part pauses."""
        opened = self._open
        if opened:
            top = opened[-1]
            if top[0] == part:  # the same part, reported twice: one part
                top[3] += 1
                return
            top[2] += now - top[1]
        elif self.first_at is None:
            self.first_at = now
        if self.compute_at is None and part != ZERO_GRAD:  # the forward ends here (the module's docstring)
            self.compute_at = now
            self.zeroed_before = sum(self.own.values()) + sum(o[2] for o in opened)
        opened.append([part, now, 0, 1])

    def end(self, part: str, now: int) -> None:
        """``part`` ends at ``now`` (parts opened inside it and left open end with it)."""
        opened, own = self._open, self.own
        while opened:
            top = opened[-1]
            name = top[0]
            if name == part and top[3] > 1:
                top[3] -= 1
                return
            opened.pop()
            ns = top[2] + now - top[1]
            own[name] = own.get(name, 0) + (ns if ns > 0 else 0)
            if opened:
                opened[-1][1] = now  # the outer part runs again
            if name == part:
                return

    def current(self) -> str:
        """The part running now: the innermost open one; else ``forward`` before the step's first
        backward or optimizer step (what comes before it is forward, as ``close`` counts it, a
        ``zero_grad`` first included), ``rest`` after one ended.

        >>> p = StepParts(); before = p.current(); p.begin("zero_grad", 1); p.end("zero_grad", 2)
        >>> zeroed = p.current(); p.begin("backward", 5); inside = p.current(); p.end("backward", 9)
        >>> before, zeroed, inside, p.current()
        ('forward', 'forward', 'backward', 'rest')
        """
        if self._open:
            return str(self._open[-1][0])
        return FORWARD if self.compute_at is None else REST

    def exclude(self, ns: int) -> None:
        """``ns`` of another component's hook ran inside the innermost open part: not its time."""
        if self._open:
            self._open[-1][2] -= ns

    def close(self, *, now: int, step_start: int, step_ns: int) -> dict[str, int]:
        """The step ended at ``now``: each part's own ns (parts still open end now), with forward
        from the sequence where no one reported it, bounded by the step's own ``step_ns``; nothing
        for a step without parts."""
        while self._open:
            self.end(self._open[-1][0], now)
        own, self.own = self.own, {}
        first, self.first_at = self.first_at, None
        compute, self.compute_at = self.compute_at, None
        zeroed, self.zeroed_before = self.zeroed_before, 0
        if own and FORWARD not in own:
            claimed = sum(own.values())
            if compute is not None:  # up to the first backward or optimizer step, less zero_grad's
                before = compute - step_start - zeroed
            else:  # zero_grad alone: what came before it
                before = step_ns if first is None else first - step_start
            own = {FORWARD: max(0, min(before, step_ns - claimed)), **own}
        return {part: ns for part, ns in own.items() if ns > 0}
