"""The report's profiler section: each profiler window's analysis, with a link to its trace.

The analyses are the ``TraceAnalysis`` objects of ``traces.jsonl``: the split of the
profiled steps into parts, the top CPU ops and GPU activity, and the trace's findings. A trace under
the run directory is linked relatively, so the directory can be moved.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import quote

from ..._units import format_us
from ...names import part_label
from ...run import RunTrace
from ...trace import ALL_PARTS, PartSplit, TraceAnalysis
from ._pieces import e, none, table


def profiler_section(
    traces: Sequence[RunTrace], split_svg: str | None, *, link_base: Path, run_dir: Path
) -> str:
    """Every profiler window of the run, after ``split_svg`` (their steps split into parts, side by side)."""
    if not traces:
        return none("no profiler windows in this run (traces.jsonl is missing)")
    return (split_svg or "") + "".join(_window(t, trace_link(t.trace, link_base, run_dir)) for t in traces)


def trace_link(trace: Path, link_base: Path, run_dir: Path) -> str:
    """A relative URL when ``trace`` lies under ``run_dir``, else a ``file://`` one."""
    absolute = trace if trace.is_absolute() else Path.cwd() / trace
    if absolute.resolve().is_relative_to(run_dir.resolve()):
        return quote(Path(os.path.relpath(absolute.resolve(), link_base.resolve())).as_posix())
    return absolute.resolve().as_uri()


def _window(t: RunTrace, href: str) -> str:
    head = f"<h3>{e(t.stage)} epoch {t.epoch}, rank {t.rank}</h3>"
    link = f'<p>trace: <a href="{e(href)}">{e(t.trace.name)}</a>'
    a: TraceAnalysis | None = t.analysis
    if a is None:
        return head + link + " (not analysed: the analysis failed or was turned off)</p>"
    facts = [f"{a.step_count} steps", format_us(a.span_us)]
    if a.gpu_busy_share is not None:
        facts.append(f"GPU busy {a.gpu_busy_share:.1%}")
    out = head + link + " · " + e(", ".join(facts)) + "</p>" + _parts(a.parts)
    if a.top_cpu_ops:
        out += table(
            ["CPU op", "calls", "self time", "share"],
            [[o.name, str(o.count), format_us(o.self_us), f"{o.share:.1%}"] for o in a.top_cpu_ops],
        )
    if a.top_cuda_kernels:
        out += table(
            ["GPU activity", "kind", "calls", "time", "share"],
            [
                [k.name, k.kind, str(k.count), format_us(k.total_us), f"{k.share:.1%}"]
                for k in a.top_cuda_kernels
            ],
        )
    if a.findings:
        out += "<ul>" + "".join(f"<li>{e(v.text)}</li>" for v in a.findings) + "</ul>"
    return out


def _parts(split: PartSplit) -> str:
    cells = [f"{format_us(split.us(p))} ({split.share(p):.1%})" for p in ALL_PARTS]
    return table(["step time", *(part_label(p) for p in ALL_PARTS)], [["per part", *cells]])
