"""Text for comparisons: two traces (``format_diff``) and the ranks of one run (``format_ranks``).

[Profiler] Diff: a.json (6 steps) -> b.json (6 steps): 77.49 ms -> 124.07 ms per step (+60.1%)
[Profiler] CPU ops, self time per step (changes of at least 620.4 µs):
[Profiler]     before     after    change  status  op
[Profiler]   23.50 ms  57.20 ms  +33.70 ms  grew    aten::mm
"""

from __future__ import annotations

from collections.abc import Sequence

from ..names import OTHER, display_name
from ._diff import Changes, TimeChange, TraceDiff
from ._format import findings_lines
from ._parts import ALL_PARTS
from ._ranks import RanksAnalysis, Straggler, work_per_step
from ._results import TraceAnalysis
from ._text import table, terminal_width
from ._words import LABELS, ROOM, prefixed, signed, steps_text, us

_SHORT = ("data", "fwd", "bwd", "opt", "other")  # ALL_PARTS in a table header


def format_diff(diff: TraceDiff, *, width: int | None = None) -> str:
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
                f" ({signed(p.change_us)}, {p.before_share:.1%} -> {p.after_share:.1%})"
                for p in shown
            )
        )
    lines += _changes("CPU ops, self time per step", "op", d.ops, d.noise_floor_us, w)
    lines += _changes(
        "Device kernels, copies and fills, time per step", "name", d.kernels, d.noise_floor_us, w
    )
    hidden = [(n, c) for n, c in (("op", d.ops), ("device", d.kernels)) if c.hidden_count]
    if hidden:
        parts = [f"{c.hidden_count:,} {n} changes (net {signed(c.hidden_us)} per step)" for n, c in hidden]
        lines.append(f"Hidden below the noise floor of {us(d.noise_floor_us)} per step: " + ", ".join(parts))
    if d.grown_sections:
        sections = [
            f"{display_name(c.name)} {us(c.before_us)} -> {us(c.after_us)} ({signed(c.change_us)})"
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
    return [
        head,
        *(
            "  " + line
            for line in table(["before", "after", "change", "status", what], rows, width=width, align="rrrl")
        ),
    ]


def _change_row(status: str, x: TimeChange) -> list[str]:
    before = us(x.before_us) if status != "appeared" else "-"
    after = us(x.after_us) if status != "vanished" else "-"
    return [before, after, signed(x.change_us), status, x.name]


def format_ranks(ranks: RanksAnalysis, *, width: int | None = None) -> str:
    """One row per rank (step time, parts, device), the straggler and why, top kernels over the ranks."""
    r, w = ranks, (width or terminal_width()) - ROOM
    lines = [f"Ranks: {r.directory} ({len(r.ranks)} traces)"]
    rows = [_rank_row(a) for a in r.ranks]
    heads = ["rank", "steps", "step", "work", *_SHORT, "busy", "overlap", "top kernel"]
    lines += ["  " + line for line in table(heads, rows, width=w, align="r" * (len(heads) - 1))]
    if r.straggler is None:
        lines.append("Straggler: none (every rank's work per step within 1% of the others')")
    else:
        lines += _straggler(r.straggler, w)
    lines += _top_kernels(r.ranks, w)
    messages = [f"rank {a.rank}: {v.text}" for a in r.ranks for v in a.findings]
    return prefixed([*lines, *findings_lines(messages, w + 2)])


def _rank_row(a: TraceAnalysis) -> list[str]:
    steps = max(a.step_count, 1)
    busy = "-" if a.gpu_busy_share is None else f"{a.gpu_busy_share:.1%}"
    overlap = "-" if a.comm is None else f"{a.comm.overlap_share:.1%}"
    top = display_name(a.top_cuda_kernels[0].name, None) if a.top_cuda_kernels else "-"
    return (
        [str(a.rank), str(a.step_count), us(a.span_us / steps), us(work_per_step(a))]
        + [f"{a.parts.share(p):.1%}" for p in ALL_PARTS]
        + [busy, overlap, top]
    )


def _straggler(s: Straggler, width: int) -> list[str]:
    head = (
        f"Straggler: rank {s.rank}, {us(s.work_us)} of work per step (step time less exposed communication)"
        f" against {us(s.others_work_us)} for the others (median), {s.excess:+.1%}"
    )
    if not s.causes:
        return [head]
    rows = [
        [signed(c.rank_us - c.others_us), us(c.rank_us), us(c.others_us), c.kind, c.name] for c in s.causes
    ]
    found = table(["excess", f"rank {s.rank}", "others", "kind", "what"], rows, width=width, align="rrrl")
    return [head + "; what takes longer on it, per step:", *("  " + line for line in found)]


def _top_kernels(ranks: Sequence[TraceAnalysis], width: int) -> list[str]:
    """The kernels with most time per step, averaged over the ranks (as many rows as each rank's list)."""
    totals: dict[str, list[float]] = {}
    for a in ranks:
        for k in a.top_cuda_kernels:
            totals.setdefault(k.name, []).append(k.total_us / max(a.step_count, 1))
    if not totals:
        return []
    top = sorted(totals.items(), key=lambda kv: -sum(kv[1]) / len(ranks))[
        : max(len(a.top_cuda_kernels) for a in ranks)
    ]
    rows = [[us(sum(v) / len(ranks)), us(max(v)), f"{len(v)}", n] for n, v in top]
    head = "Top kernels over the ranks (time per step: mean over ranks, highest rank):"
    return [
        head,
        *("  " + line for line in table(["mean", "max", "ranks", "kernel"], rows, width=width, align="rrr")),
    ]
