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
cost per module call), a step's forward is what came before its first part: the forward pass and
the loss, up to backward or the optimizer step. A step with no part at all (an evaluation step,
whose own time is its forward) is not split. What no part claims is the step's rest (the loop's
own code, gradient clipping, a callback's work inside the closure that is not a hook).

>>> p = StepParts()
>>> p.begin("optimizer", 10); p.begin("forward", 12); p.end("forward", 20); p.end("optimizer", 25)
>>> p.close(now=30, step_start=0, step_ns=30)  # the optimizer's own: 2 before forward, 5 after
{'forward': 8, 'optimizer': 7}
"""

from __future__ import annotations

from ..names import FORWARD, REST


class StepParts:
    """The parts of the step that is open: which are open now, and each one's own time so far."""

    __slots__ = ("_open", "first_at", "own")

    def __init__(self) -> None:
        self._open: list[list[int | str]] = []  # [part, since, own ns, depth], innermost last
        self.own: dict[str, int] = {}
        self.first_at: int | None = None  # when the step's first part began

    def begin(self, part: str, now: int) -> None:
        """``part`` begins at ``now``; an open outer part pauses."""
        if self._open:
            top = self._open[-1]
            if top[0] == part:  # the same part, reported twice: one part
                top[3] = int(top[3]) + 1
                return
            top[2] = int(top[2]) + now - int(top[1])
        elif self.first_at is None:
            self.first_at = now
        self._open.append([part, now, 0, 1])

    def end(self, part: str, now: int) -> None:
        """``part`` ends at ``now`` (parts opened inside it and left open end with it)."""
        while self._open:
            top = self._open[-1]
            if top[0] == part and int(top[3]) > 1:
                top[3] = int(top[3]) - 1
                return
            self._open.pop()
            name = str(top[0])
            self.own[name] = self.own.get(name, 0) + max(0, int(top[2]) + now - int(top[1]))
            if self._open:
                self._open[-1][1] = now  # the outer part runs again
            if name == part:
                return

    def current(self) -> str:
        """The part running now: the innermost open one; else ``forward`` before the step's first
        part (what comes before it is forward, as ``close`` counts it), ``rest`` after one ended.

        >>> p = StepParts(); before = p.current(); p.begin("backward", 5); inside = p.current()
        >>> p.end("backward", 9); before, inside, p.current()
        ('forward', 'backward', 'rest')
        """
        if self._open:
            return str(self._open[-1][0])
        return FORWARD if self.first_at is None else REST

    def exclude(self, ns: int) -> None:
        """``ns`` of another component's hook ran inside the innermost open part: not its time."""
        if self._open:
            self._open[-1][2] = int(self._open[-1][2]) - ns

    def close(self, *, now: int, step_start: int, step_ns: int) -> dict[str, int]:
        """The step ended at ``now``: each part's own ns (parts still open end now), with forward
        from the sequence where no one reported it, bounded by the step's own ``step_ns``; nothing
        for a step without parts."""
        while self._open:
            self.end(str(self._open[-1][0]), now)
        own, self.own = self.own, {}
        first, self.first_at = self.first_at, None
        if own and FORWARD not in own:
            claimed = sum(own.values())
            before = step_ns if first is None else first - step_start
            own = {FORWARD: max(0, min(before, step_ns - claimed)), **own}
        return {part: ns for part, ns in own.items() if ns > 0}
