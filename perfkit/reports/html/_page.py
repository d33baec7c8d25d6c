"""``write_html_report``: a run directory as one self-contained HTML page.

    perfkit report lightning_logs/version_0/perfkit          # writes .../perfkit/report.html
    perfkit.reports.write_html_report("runs/exp1", "exp1.html")

The page has no script and loads nothing: the CSS is inline and the plots are inline SVG
drawn by matplotlib. Its sections (``<section id=...>``): findings, steps, time, memory,
slowest, profiler. What the run directory lacks (a killed run has no ``final.json``) is said
at the top, and the rest is reported from what there is.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from ..._snapshot import Snapshot
from ..._units import format_seconds
from ...findings import Diagnosis, diagnose
from ...names import stage_label
from ...run import REPORT_FILE, RunData, RunWindow, read_run
from ..text._snapshot import HEAD, RECURSION_NOTE, tree_rows
from ._pieces import e, none, plot_or, table
from ._profiler import profiler_section

CSS = """
body { font-family: system-ui, "Segoe UI", "DejaVu Sans", sans-serif; margin: 0 auto; max-width: 1180px;
       padding: 1em 2em; color: #222; background: #fff; }
h1 { font-size: 1.6em; } h2 { border-bottom: 2px solid #ddd; padding-bottom: .2em; margin-top: 1.6em; }
section { margin-bottom: 2em; } svg { max-width: 100%; height: auto; display: block; margin: 1em 0; }
table { border-collapse: collapse; font-size: .9em; margin: .6em 0; }
th, td { padding: .25em .7em; border-bottom: 1px solid #eee; text-align: right; }
th:first-child, td:first-child { text-align: left; }
td.tree { font-family: "DejaVu Sans Mono", monospace; white-space: pre; }
ul.findings li { margin: .4em 0; } .problems { background: #fff4e5; border-left: 4px solid #f0a020;
padding: .4em 1em; } .none { color: #777; font-style: italic; } nav a { margin-right: 1em; }
.headline { font-size: 1.15em; background: #eef4ff; border-left: 4px solid #1f77b4; padding: .5em 1em; }
"""

SECTIONS = {
    "findings": "Verdicts",
    "steps": "Step times",
    "time": "Where the time goes",
    "memory": "Memory",
    "slowest": "Slowest steps",
    "profiler": "Profiler windows",
}
SLOWEST_PER_STAGE = 10


def write_html_report(
    run_dir: str | os.PathLike[str], out: str | os.PathLike[str] | None = None, *, job: str | None = None
) -> Path:
    """Write the report of ``run_dir`` to ``out`` (default ``RUN_DIR/report.html``, or
    ``report_JOB.html`` for a job beside another); returns its path. ``job``: of a directory
    several jobs wrote, the one to report (default the newest; see ``read_run``).

    Raises ``FileNotFoundError`` or ``ValueError`` naming the file when the run directory
    is missing or broken (see ``read_run``).

    >>> write_html_report("runs/exp1")  # doctest: +SKIP
    PosixPath('runs/exp1/report.html')
    """
    run = read_run(run_dir, job=job)
    path = Path(out) if out is not None else run.own_file(REPORT_FILE)
    path.write_text(render_html(run, link_base=path.parent), encoding="utf-8")
    return path


def render_html(run: RunData, *, link_base: Path) -> str:
    """The page for ``run``; links to trace files are made relative to ``link_base`` where they can be."""
    try:
        from . import _plots as plots
    except ImportError as exc:
        raise ImportError(
            "perfkit's HTML report draws with matplotlib: pip install 'perfkit[report]'"
        ) from exc
    snapshot, problems = _run_snapshot(run)
    windows = sorted(run.windows, key=lambda w: w.start_ns)  # Lightning ends validation first
    problems += lost_records(windows)
    memory = plots.memory_svg(snapshot, windows) if snapshot is not None else None
    diagnosis = diagnose(run)
    bodies = {
        "findings": _findings(diagnosis, problems),
        "steps": plot_or(plots.steps_svg(windows), "no step times recorded")
        + _titled("The step's parts: forward, backward, optimizer", plots.step_parts_svg(windows)),
        "time": _time(windows, plots.time_split_svg(windows), plots.workers_svg(windows))
        + _titled("Where the time went, interval by interval", plots.timeline_svg(run.intervals)),
        "memory": plot_or(memory, "no memory samples: a perfkit.ResourceSampler records them"),
        "slowest": _slowest(windows),
        "profiler": profiler_section(
            run.traces, plots.profiler_svg(run.traces), link_base=link_base, run_dir=run.path
        ),
    }
    nav = "".join(f'<a href="#{s}">{title}</a>' for s, title in SECTIONS.items())
    sections = "".join(
        f'<section id="{s}"><h2>{title}</h2>{bodies[s]}</section>\n' for s, title in SECTIONS.items()
    )
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>perfkit report: {e(run.path.name)}</title><style>{CSS}</style></head>\n"
        f"<body><h1>perfkit report</h1>{_headline(diagnosis)}<p>{e(_run_line(run, windows))}</p>"
        f"<nav>{nav}</nav>\n"
        f"{sections}</body></html>\n"
    )


def _run_snapshot(run: RunData) -> tuple[Snapshot | None, list[str]]:
    """The whole run's snapshot: ``final.json``, else the windows' merged (and that said)."""
    problems = list(run.problems)
    if run.final is not None:
        return run.final, problems
    snaps = [w.snapshot for w in run.windows]
    if not snaps:
        return None, problems
    problems.append("memory below is the sum of the windows, not of the whole run")
    return snaps[0].merge(*snaps[1:]), problems


def lost_records(windows: Sequence[RunWindow]) -> list[str]:
    """One line per window that lost records on the way: DataLoader workers that could not hand
    them over, and what the registry dropped (invalid records, names past its bound)."""
    out = []
    for w in windows:
        snap = w.snapshot
        if snap.dropped_in_transfer:
            out.append(
                f"{w.stage} epoch {w.epoch}: {snap.dropped_in_transfer:,} records dropped by DataLoader "
                "workers before they reached the main process (a batch made more than the workers "
                "can hand over): its worker figures are short by that much"
            )
        for reason, n in snap.dropped.items():
            out.append(f"{w.stage} epoch {w.epoch}: {n:,} records dropped ({reason})")
    return out


def _run_line(run: RunData, windows: Sequence[RunWindow]) -> str:
    stages = ", ".join(dict.fromkeys(stage_label(w.stage) for w in windows))
    version = run.meta.get("perfkit", "?")
    return f"{run.path} · {len(run.windows)} windows ({stages or 'none'}) · written by perfkit {version}"


def _headline(diagnosis: Diagnosis) -> str:
    """The page's first line: the verdict that explains the most time, and what to do."""
    top = diagnosis.top
    if top is None:
        return '<p class="headline">Nothing stands out: no rule of perfkit crossed its threshold.</p>'
    return (
        f'<p class="headline"><strong>{e(top.kind)}</strong> · {top.run_share:.0%} of the run: '
        f"{e(top.said)}. <em>{e(top.action)}</em></p>"
    )


def _findings(diagnosis: Diagnosis, problems: Sequence[str]) -> str:
    rows = [
        [f"{i}", v.kind, f"{v.stage} {v.epoch}", f"{v.share:.0%}", f"{v.run_share:.0%}", v.said, v.action]
        for i, v in enumerate(diagnosis.verdicts, 1)
    ]
    out = (
        table(["#", "verdict", "stage epoch", "of the epoch", "of the run", "why", "what to do"], rows)
        if rows
        else none("no verdict: no rule of perfkit crossed its threshold")
    )
    if diagnosis.changes:
        out += "<h3>Changes while it ran</h3>" + table(
            ["stage epoch", "what moved, from which step", "what to do"],
            [[f"{v.stage} {v.epoch}", v.said, v.action] for v in diagnosis.changes],
        )
    if diagnosis.abstentions:
        said = "; ".join(f"{a.rule} ({a.stage}): no {a.missing}" for a in diagnosis.abstentions)
        out += none(f"rules that could not judge: {said}")
    if problems:
        missing = "".join(f"<li>{e(p)}</li>" for p in problems)
        out = f'<div class="problems"><strong>Missing from this run</strong><ul>{missing}</ul></div>' + out
    return out


def _time(windows: Sequence[RunWindow], split: str | None, workers: str | None) -> str:
    out = "<h3>Where each stage epoch's time went</h3>" + plot_or(split, "no windows")
    out += "<h3>Section trees, per stage</h3>"
    out += none(
        "each stage's epochs merged; self = total minus the sections inside it; p95 and max per stage"
    )
    trees = 0
    for stage, snapshot in _per_stage(windows).items():
        rows = tree_rows(snapshot)
        if rows:
            out += f"<h4>{e(stage_label(stage))}</h4>"
            out += table(
                ["section", *HEAD, "errors"], [[label, *cells] for label, cells in rows], first_class="tree"
            )
            if snapshot.recursion:
                out += none(RECURSION_NOTE)
            trees += 1
    if not trees:
        out += none("no sections recorded")
    out += "<h3>Worker time per batch against the main loop</h3>"
    return out + plot_or(workers, "no DataLoader worker records (no workers, or the loader not instrumented)")


def _titled(title: str, svg: str | None) -> str:
    """A plot drawn only where the run has it (the step's parts of a training loop over torch; the
    interval windows of a long or step-based epoch), under its title; nothing where it has none."""
    return "" if svg is None else f"<h3>{title}</h3>" + svg


def _per_stage(windows: Sequence[RunWindow]) -> dict[str, Snapshot]:
    """Each stage's windows merged into one snapshot: exact totals, percentiles of that stage alone."""
    snaps: dict[str, list[Snapshot]] = {}
    for w in windows:
        snaps.setdefault(w.stage, []).append(w.snapshot)
    return {stage: parts[0].merge(*parts[1:]) for stage, parts in snaps.items()}


def _slowest(windows: Sequence[RunWindow]) -> str:
    rows = []
    stages = dict.fromkeys(w.stage for w in windows)
    for stage in stages:
        steps = sorted(
            (s for w in windows if w.stage == stage for s in w.slowest), key=lambda s: -s.duration_s
        )
        for s in steps[:SLOWEST_PER_STAGE]:
            tags = ", ".join(f"{k}={v:g}" for k, v in s.tags.items())
            rows.append(
                [s.stage, str(s.epoch), str(s.batch_idx), str(s.rank), format_seconds(s.duration_s), tags]
            )
    if not rows:
        return none("no slowest steps recorded")
    return table(["stage", "epoch", "batch", "rank", "duration", "tags"], rows)
