"""A run's diagnosis as text for a terminal (``perfkit summary``): the top verdict first, then tables."""

from __future__ import annotations

from collections.abc import Sequence

from ..._display import display_name
from ..._units import format_seconds
from ...findings import UNJUDGED, Diagnosis
from ...names import part_label, stage_label
from ...run import RunData, RunInterval
from ...stages import PARTS
from ._lines import cut, safe, wide_width, wrap

RANKED = 3
"""Verdicts said when a run ends (its ``verdicts.json`` and ``perfkit summary`` have them all)."""


def ranked_verdicts_text(diagnosis: Diagnosis, run_dir: object) -> str:
    """A run's first verdicts, ranked by the share of its time they explain, as a monitor says them
    when the run ends; empty when there are none."""
    if diagnosis.top is None:
        return ""
    ranked = [
        f"  {i}. {v.run_share:.0%} of the run: {safe(v.line)}"
        for i, v in enumerate(diagnosis.verdicts[:RANKED], 1)
    ]
    head = "[perfkit] the run's verdicts, ranked by the share of its time they explain:"
    return "\n".join([head, *ranked, f"  (all of them: perfkit summary {run_dir})"])


def _job(run: RunData) -> str:
    """The header's note on a directory several jobs wrote: which one this is."""
    if len(run.jobs) < 2:
        return ""
    return f", job {display_name(run.job, 40)}: 1 of the {len(run.jobs)} jobs that wrote it (see below)"


def diagnosis_text(run: RunData, diagnosis: Diagnosis) -> str:
    """The summary of ``run``: its top verdict, every verdict by rank, each stage's account, memory."""
    width = wide_width()
    stages = ", ".join(stage_label(s.stage) for s in diagnosis.stages) or "none"
    lines = [f"perfkit summary: {run.path} ({len(run.windows)} windows: {stages}){_job(run)}"]
    top = diagnosis.top
    unjudged = {a.stage for a in diagnosis.abstentions if a.rule == UNJUDGED}
    if top is not None:
        lines.append(f"TOP: {top.kind}, {top.run_share:.0%} of the run: {safe(top.said)}. {safe(top.action)}")
    elif unjudged and unjudged >= {s.stage for s in diagnosis.stages}:
        lines.append("TOP: too little to judge (see 'Could not judge' below)")
    else:
        lines.append("TOP: nothing stands out (no rule crossed its threshold)")
    if diagnosis.verdicts:
        lines += ["", "Verdicts, by the share of the run's time they explain:"]
        for i, v in enumerate(diagnosis.verdicts, 1):
            where = f"{display_name(v.stage, 24)} {v.epoch}"
            shares = f"{v.share:>4.0%} of the epoch, {v.run_share:>4.0%} of run"
            head = f"{i:>3}. {v.kind:<22} {where:<11} {shares}"
            lines += [
                head,
                wrap(safe(v.said), width, "       "),
                wrap(f"-> {safe(v.action)}", width, "       "),
            ]
    if diagnosis.changes:
        lines += ["", "Changes while it ran (interval windows against the ones before):"]
        for v in diagnosis.changes:
            lines += [
                wrap(f"  CHANGE {safe(v.said)}", width, "       "),
                wrap(f"-> {safe(v.action)}", width, "       "),
            ]
    if diagnosis.context:
        lines += ["", "Context (true, each under the run's floor of what is worth acting on):"]
        lines += [
            cut(
                f"  {v.kind} ({display_name(v.stage)} {v.epoch}, {v.run_share:.1%} of run): {safe(v.said)}",
                width,
            )
            for v in diagnosis.context
        ]
    lines += ["", "Where the time went (each stage's last epoch):", _account_table(diagnosis)]
    if run.intervals:
        lines += ["", *timeline_lines(run.intervals, width)]
    if diagnosis.memory_peaks_mb:
        peaks = ", ".join(
            f"{display_name(k)} {v:,.0f} MB" for k, v in sorted(diagnosis.memory_peaks_mb.items())
        )
        lines += ["", cut(f"Memory peaks: {peaks}", width)]
    if diagnosis.abstentions:
        said = "; ".join(
            f"{a.rule} ({display_name(a.stage)}): no {safe(a.missing)}" for a in diagnosis.abstentions
        )
        lines += ["", cut(f"Could not judge: {said}", width * 3)]
    if diagnosis.lost:
        lines += ["", "Lost: " + ", ".join(f"{display_name(k)} {v:,.0f}" for k, v in diagnosis.lost.items())]
    if run.problems:
        lines += ["", "Missing from this run:", *(f"  {safe(p)}" for p in run.problems)]
    return "\n".join(lines)


TIMELINE_ROWS = 12
"""Interval lines a summary shows at most: the first, the last, and those where something changed."""


def timeline_lines(intervals: Sequence[RunInterval], width: int) -> list[str]:
    """The run's timeline: one compact line per interval window (its steps, its largest parts, its
    first verdict), keeping the first, the last and every interval with a CHANGE when there are many."""
    keep = list(range(len(intervals)))
    if len(keep) > TIMELINE_ROWS:
        changed = [i for i, x in enumerate(intervals) if any(v.kind == "CHANGE" for v in x.verdicts)]
        keep = sorted({0, len(intervals) - 1, *changed[: TIMELINE_ROWS - 2]})
    lines = [f"Timeline ({len(intervals)} interval windows; {len(intervals) - len(keep)} not shown):"]
    for i in keep:
        x = intervals[i]
        a = x.account
        parts = sorted((p for p in PARTS if a.fraction(p) >= 0.05), key=a.fraction, reverse=True)
        shares = " · ".join(f"{part_label(p)} {a.fraction(p):.0%}" for p in parts[:3])
        merged = f" ({x.merged} merged)" if x.merged > 1 else ""
        head = f"  {display_name(x.stage, 12)} {x.epoch} steps {x.steps[0]}-{x.steps[1]}{merged}: "
        said = f"{head}{format_seconds(x.wall_s)}, {shares}"
        if x.verdicts:
            said += f"; {x.verdicts[0].kind} {x.verdicts[0].share:.0%}"
        lines.append(cut(said, width))
    return lines


def _account_table(diagnosis: Diagnosis) -> str:
    head = f"  {'stage':<12}{'epochs':>7}{'epoch':>11}" + "".join(f"{p.replace('_', ' '):>14}" for p in PARTS)
    rows = [head]
    for s in diagnosis.stages:
        wall = sum(s.account.values())
        cells = "".join(f"{s.account_fractions[p]:>14.1%}" for p in PARTS)
        rows.append(f"  {stage_label(s.stage):<12}{s.epochs:>7}{format_seconds(wall):>11}{cells}")
    return "\n".join(rows)
