"""The report's profiler section: each profiler window's analysis, with a link to its trace.

The summaries are ``TraceAnalysis.to_dict()`` as ``traces.jsonl`` holds them: the phase
split of the profiled steps, the top CPU ops and CUDA kernels, and the trace's findings.
A trace under the run directory is linked relatively, so the directory can be moved.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

from ._html import e, none, table
from ._run_reader import RunTrace
from ._trace_phases import ALL_PHASES
from ._units import format_seconds


def profiler_section(
    traces: Sequence[RunTrace], split_svg: str | None, *, link_base: Path, run_dir: Path
) -> str:
    """Every profiler window of the run, after ``split_svg`` (their phase splits side by side)."""
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
    head = f"<h3>{e(t.phase)} epoch {t.epoch}, rank {t.rank}</h3>"
    link = f'<p>trace: <a href="{e(href)}">{e(t.trace.name)}</a>'
    s = t.summary
    if s is None:
        return head + link + " (not analysed: the analysis failed or was turned off)</p>"
    facts = [f"{s.get('step_count', '?')} steps", _us(s.get("span_us"))]
    if isinstance(s.get("gpu_busy_share"), (int, float)):
        facts.append(f"GPU busy {_share(s['gpu_busy_share'])}")
    out = head + link + " · " + e(", ".join(facts)) + "</p>" + _phases(s.get("phases"))
    ops = _rows(s, "top_cpu_ops", ("name", "count", "self_us", "share"))
    if ops:
        out += table(
            ["CPU op", "calls", "self time", "share"],
            [[o["name"], str(o["count"]), _us(o["self_us"]), _share(o["share"])] for o in ops],
        )
    kernels = _rows(s, "top_cuda_kernels", ("name", "kind", "count", "total_us", "share"))
    if kernels:
        out += table(
            ["GPU activity", "kind", "calls", "time", "share"],
            [
                [k["name"], k["kind"], str(k["count"]), _us(k["total_us"]), _share(k["share"])]
                for k in kernels
            ],
        )
    found = _rows(s, "findings", ("message",))
    if found:
        out += "<ul>" + "".join(f"<li>{e(f['message'])}</li>" for f in found) + "</ul>"
    return out


def _phases(phases: object) -> str:
    if not isinstance(phases, Mapping) or not isinstance(phases.get("shares"), Mapping):
        return ""
    shares = phases["shares"]
    cells = [f"{_us(phases.get(f'{p}_us'))} ({_share(shares.get(p))})" for p in ALL_PHASES]
    return table(["step time", *(p.replace("_", " ") for p in ALL_PHASES)], [["per phase", *cells]])


def _rows(summary: Mapping[str, Any], key: str, fields: Sequence[str]) -> list[Mapping[str, Any]]:
    """The entries of ``summary[key]`` that have every one of ``fields`` (others are left out)."""
    rows = summary.get(key)
    if not isinstance(rows, list):
        return []
    return [r for r in rows if isinstance(r, Mapping) and all(f in r for f in fields)]


def _us(us: object) -> str:
    return format_seconds(us / 1e6) if isinstance(us, (int, float)) else "?"


def _share(share: object) -> str:
    return f"{share:.1%}" if isinstance(share, (int, float)) else "?"
