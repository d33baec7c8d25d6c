"""A run's diagnosis and a comparison of two runs as text for a terminal (``perfkit summary``,
``perfkit compare``): the top verdict first, then tables."""

from __future__ import annotations

import shutil
import textwrap

from .._units import format_seconds
from ..findings import Comparison, Diagnosis
from ..names import display_name, stage_label
from ..run import RunData
from ..stages import PARTS


def _width() -> int:
    return max(80, shutil.get_terminal_size((120, 24)).columns)


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _wrap(text: str, width: int, indent: str) -> str:
    return textwrap.fill(text, width, initial_indent=indent, subsequent_indent=indent + "   ")


def _safe(text: str) -> str:
    """Prose that may hold a name (a message, a problem): on one line, whatever the name holds."""
    return display_name(text, width=None)


def _job(run: RunData) -> str:
    """The header's note on a directory several jobs wrote: which one this is."""
    if len(run.jobs) < 2:
        return ""
    return f", job {display_name(run.job, 40)}: 1 of the {len(run.jobs)} jobs that wrote it (see below)"


def diagnosis_text(run: RunData, diagnosis: Diagnosis) -> str:
    """The summary of ``run``: its top verdict, every verdict by rank, each stage's account, memory."""
    width = _width()
    stages = ", ".join(stage_label(s.stage) for s in diagnosis.stages) or "none"
    lines = [f"perfkit summary: {run.path} ({len(run.windows)} windows: {stages}){_job(run)}"]
    top = diagnosis.top
    lines.append(
        f"TOP: {top.kind}, {top.run_share:.0%} of the run: {_safe(top.message)}. {_safe(top.action)}"
        if top is not None
        else "TOP: nothing stands out (no rule crossed its threshold)"
    )
    if diagnosis.verdicts:
        lines += ["", "Verdicts, by the share of the run's time they explain:"]
        for i, v in enumerate(diagnosis.verdicts, 1):
            where = f"{display_name(v.stage, 24)} {v.epoch}"
            shares = f"{v.share:>4.0%} of the epoch, {v.run_share:>4.0%} of run"
            head = f"{i:>3}. {v.kind:<22} {where:<11} {shares}"
            lines += [
                head,
                _wrap(_safe(v.message), width, "       "),
                _wrap(f"-> {_safe(v.action)}", width, "       "),
            ]
    lines += ["", "Where the time went (each stage's last epoch):", _account_table(diagnosis)]
    if diagnosis.memory_peaks_mb:
        peaks = ", ".join(
            f"{display_name(k)} {v:,.0f} MB" for k, v in sorted(diagnosis.memory_peaks_mb.items())
        )
        lines += ["", _cut(f"Memory peaks: {peaks}", width)]
    if diagnosis.abstentions:
        said = "; ".join(
            f"{a.rule} ({display_name(a.stage)}): no {_safe(a.missing)}" for a in diagnosis.abstentions
        )
        lines += ["", _cut(f"Could not judge: {said}", width * 3)]
    if diagnosis.lost:
        lines += ["", "Lost: " + ", ".join(f"{display_name(k)} {v:,.0f}" for k, v in diagnosis.lost.items())]
    if run.problems:
        lines += ["", "Missing from this run:", *(f"  {_safe(p)}" for p in run.problems)]
    return "\n".join(lines)


def _account_table(diagnosis: Diagnosis) -> str:
    head = f"  {'stage':<12}{'epochs':>7}{'epoch':>11}" + "".join(f"{p.replace('_', ' '):>14}" for p in PARTS)
    rows = [head]
    for s in diagnosis.stages:
        wall = sum(s.account.values())
        cells = "".join(f"{s.account_fractions[p]:>14.1%}" for p in PARTS)
        rows.append(f"  {stage_label(s.stage):<12}{s.epochs:>7}{format_seconds(wall):>11}{cells}")
    return "\n".join(rows)


def comparison_text(c: Comparison) -> str:
    """``perfkit compare``: the conclusion first, then every part that changed beyond its noise."""
    lines = [c.line, f"  before: {c.before}", f"  after:  {c.after}", ""]
    changed = [x for x in c.changes if x.significant]
    hidden = len(c.changes) - len(changed)
    lines.append(
        f"  {'stage':<10}{'part':<14}{'before':>12}{'after':>12}{'change':>12}{'noise':>11}   (per step)"
    )
    for x in changed:
        change = ("+" if x.change_s >= 0 else "-") + format_seconds(abs(x.change_s))
        lines.append(
            f"  {display_name(x.stage, 24):<10}{x.part.replace('_', ' '):<14}{format_seconds(x.before_s):>12}"
            f"{format_seconds(x.after_s):>12}{change:>12}{format_seconds(x.noise_s):>11}"
        )
    if hidden:
        lines.append(f"  ({hidden} part(s) changed less than their noise band and are not shown)")
    for title, verdicts in (("Verdicts that appeared", c.appeared), ("Verdicts that went away", c.gone)):
        if verdicts:
            lines += [
                "",
                f"{title}:",
                *(f"  {v.kind} ({display_name(v.stage)}): {_safe(v.message)}" for v in verdicts),
            ]
    return "\n".join(lines)
