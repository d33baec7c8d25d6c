"""A comparison of two runs as text for a terminal (``perfkit compare``): the conclusion first."""

from __future__ import annotations

from ..._display import display_name
from ..._units import format_seconds
from ...findings import Comparison
from ._lines import safe


def comparison_text(c: Comparison) -> str:
    """``perfkit compare``: the conclusion first, then every part that changed beyond its noise."""
    lines = [
        c.line,
        *([f"  {safe(c.advice)}"] if c.advice else []),
        f"  before: {c.before}",
        f"  after:  {c.after}",
        "",
    ]
    changed = [x for x in c.changes if x.significant]
    hidden = len(c.changes) - len(changed)
    lines.append(
        f"  {'stage':<10}{'part':<14}{'before':>12}{'after':>12}{'change':>12}{'noise':>11}   (per step)"
    )
    for x in changed:
        change = format_seconds(x.change_s, sign=True)
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
                *(f"  {v.kind} ({display_name(v.stage)}): {safe(v.said)}" for v in verdicts),
            ]
    return "\n".join(lines)
