"""Text for the ranks of one run (``perfkit analyze DIR``): a row per rank, the straggler and why.

[Profiler] Ranks: traces (2 traces)
[Profiler]   rank  steps       step       work  data    fwd    bwd    opt  other   busy  overlap  top kernel
[Profiler]      0      2  615.12 ms  446.63 ms  0.6%  22.7%  37.7%  33.9%   5.0%  44.5%    14.9%  ncclKernel…
"""

from __future__ import annotations

from collections.abc import Sequence

from ..._display import display_name
from ..._units import format_us as us
from ...trace import ALL_PARTS, RanksAnalysis, Straggler, TraceAnalysis, work_per_step
from ._analysis import findings_lines
from ._lines import terminal_width
from ._table import block, table
from ._words import ROOM, prefixed

_SHORT = ("data", "fwd", "bwd", "opt", "other")  # ALL_PARTS in a table header


def ranks_text(ranks: RanksAnalysis, *, width: int | None = None) -> str:
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
        [us(c.rank_us - c.others_us, sign=True), us(c.rank_us), us(c.others_us), c.kind, c.name]
        for c in s.causes
    ]
    head += "; what takes longer on it, per step:"
    return block(
        head, ["excess", f"rank {s.rank}", "others", "kind", "what"], rows, width=width, align="rrrl"
    )


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
    return block(head, ["mean", "max", "ranks", "kernel"], rows, width=width, align="rrr")
