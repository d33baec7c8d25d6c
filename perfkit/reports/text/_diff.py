"""Text for the comparison of two traces (``perfkit diff``): step time, parts, ops and kernels that moved.

[Profiler] Diff: a.json (6 steps) -> b.json (6 steps): 77.49 ms -> 124.07 ms per step (+60.1%)
[Profiler] CPU ops, self time per step (changes of at least 620.4 µs):
[Profiler]     before     after    change  status  op
[Profiler]   23.50 ms  57.20 ms  +33.70 ms  grew    aten::mm
"""

from __future__ import annotations

from ..._display import display_name
from ..._units import format_us as us
from ...names import OTHER
from ...trace import Changes, TimeChange, TraceDiff
from ._lines import terminal_width
from ._table import block
from ._words import LABELS, ROOM, prefixed, steps_text


def diff_text(diff: TraceDiff, *, width: int | None = None) -> str:
    """``diff`` as ``[Profiler]`` lines: step time, the parts either side has, ops and kernels that moved."""
    d, w = diff, (width or terminal_width()) - ROOM
    change = (d.after_step_us / d.before_step_us - 1) if d.before_step_us > 0 else 0.0
    lines = [
        f"Diff: {d.before} ({steps_text(d.before_steps)}) -> {d.after} ({steps_text(d.after_steps)}):"
        f" {us(d.before_step_us)} -> {us(d.after_step_us)} per step ({change:+.1%})"
    ]
    marked = [p for p in d.parts if p.part != OTHER and (p.before_us > 0 or p.after_us > 0)]
    if marked:  # other means something only beside a part that is marked
        shown = [*marked, *(p for p in d.parts if p.part == OTHER)]
        lines.append(
            "Parts per step: "
            + ", ".join(
                f"{LABELS[p.part]} {us(p.before_us)} -> {us(p.after_us)}"
                f" ({us(p.change_us, sign=True)}, {p.before_share:.1%} -> {p.after_share:.1%})"
                for p in shown
            )
        )
    lines += _changes("CPU ops, self time per step", "op", d.ops, d.noise_floor_us, w)
    lines += _changes(
        "Device kernels, copies and fills, time per step", "name", d.kernels, d.noise_floor_us, w
    )
    hidden = [(n, c) for n, c in (("op", d.ops), ("device", d.kernels)) if c.hidden_count]
    if hidden:
        parts = [
            f"{c.hidden_count:,} {n} changes (net {us(c.hidden_us, sign=True)} per step)" for n, c in hidden
        ]
        lines.append(f"Hidden below the noise floor of {us(d.noise_floor_us)} per step: " + ", ".join(parts))
    if d.grown_sections:
        sections = [
            f"{display_name(c.name)} {us(c.before_us)} -> {us(c.after_us)} ({us(c.change_us, sign=True)})"
            for c in d.grown_sections
        ]
        lines.append("Sections that grew per step: " + ", ".join(sections))
    return prefixed(lines)


def _changes(title: str, what: str, c: Changes, floor: float, width: int) -> list[str]:
    groups = (("appeared", c.appeared), ("vanished", c.vanished), ("grew", c.grown), ("shrank", c.shrunk))
    rows = [_change_row(status, x) for status, changes in groups for x in changes]
    if not rows:
        return [f"{title}: no change of {us(floor)} or more"]
    head = f"{title} (changes of {us(floor)} or more):"
    return block(head, ["before", "after", "change", "status", what], rows, width=width, align="rrrl")


def _change_row(status: str, x: TimeChange) -> list[str]:
    before = us(x.before_us) if status != "appeared" else "-"
    after = us(x.after_us) if status != "vanished" else "-"
    return [before, after, us(x.change_us, sign=True), status, x.name]
