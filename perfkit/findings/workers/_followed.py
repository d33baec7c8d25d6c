"""Proof after: did run B make the change run A's top verdict proposed, and what did it gain?

The change is checked against the settings B recorded (``perfkit.names.setting_gauge``,
``TORCH_THREADS``), never against what B's verdicts say; the gain is the stage's wall time per
step, A against B, against the predicted interval.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from ..._rule import Verdict
from ...names import TORCH_THREADS, setting_gauge, step_series
from ...stages import StageWindow
from ._model import NOT_SETTINGS


def advice_followed(
    verdicts: Sequence[Verdict], a: Mapping[str, list[StageWindow]], b: Mapping[str, list[StageWindow]]
) -> str:
    """One sentence on run A's first verdict with a change; empty when it proposed none."""
    v = next((v for v in verdicts if v.change), None)
    if v is None or v.stage not in a or v.stage not in b:
        return ""
    set_in_b = _settings(b[v.stage][-1], v.change)
    wanted = ", ".join(f"{k}={val}" for k, val in v.change.items() if k not in NOT_SETTINGS)
    missing = [k for k, val in v.change.items() if k not in NOT_SETTINGS and set_in_b.get(k) != float(val)]
    if missing:
        seen = ", ".join(f"{k}={set_in_b[k]:g}" if k in set_in_b else f"{k} not recorded" for k in missing)
        return f"run A's {v.kind} proposed {wanted}; run B did not make it ({seen})"
    saved = 1 - _per_step(b[v.stage]) / _per_step(a[v.stage]) if _per_step(a[v.stage]) else 0.0
    said = f"run A's {v.kind} proposed {wanted}; run B made it and saved {saved:.0%} of {v.stage}'s step time"
    if v.gain is None:
        return said
    low, high = v.gain
    where = "inside" if low <= saved <= high else "below" if saved < low else "above"
    return f"{said}, {where} the predicted {low:.0%}-{high:.0%}"


def _settings(w: StageWindow, change: Mapping[str, Any]) -> dict[str, float]:
    loader = str(change.get("loader", w.loader_name))
    out = {}
    for key in (k for k in change if k not in NOT_SETTINGS):
        name = TORCH_THREADS if key == "torch_threads" else setting_gauge(loader, key)
        g = w.snapshot.gauges.get(name)
        if g is not None:
            out[key] = g.last
    return out


def _per_step(windows: Sequence[StageWindow]) -> float:
    settled = windows[1:] if len(windows) > 1 else windows
    per = []
    for w in settled:
        step = w.snapshot.get(step_series(w.stage))
        if step is not None and step.count:
            per.append(w.wall_s / (step.count / max(1, len(w.ranks))))
    return statistics.fmean(per) if per else 0.0
