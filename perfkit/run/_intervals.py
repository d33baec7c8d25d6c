"""The intervals of a run directory: ``intervals.jsonl``, bounded however long the run.

Each interval window (a piece of a long stage epoch still running: ``perfkit.stages.Intervals``)
is one line: the window's fields (scope, steps, account, verdicts), the step it was logged at,
its metrics and wall clock. It keeps no snapshot file: an interval's percentiles are in its
metrics, and a run directory of a week at one interval a minute must stay small.

Past ``MAX_INTERVALS`` lines the older half are merged in neighbouring pairs and the file is
rewritten (atomically), so a run keeps at most ``MAX_INTERVALS`` lines, the recent ones at full
resolution and the old ones coarser. A merged line says how many intervals it holds
(``merged``); its times, steps and samples add, its account adds part by part, its rates and
fractions are the time-weighted mean (exact for rates: samples over seconds), its peaks and
upper percentiles the larger of the two (an upper bound), its verdicts those of the longer
interval plus every change.

    >>> a = {"steps": [10, 19], "wall_s": 1.0, "metrics": {"x/steps": 10.0, "x/step_ms_p95": 3.0}}
    >>> b = {"steps": [20, 29], "wall_s": 3.0, "metrics": {"x/steps": 10.0, "x/step_ms_p95": 5.0}}
    >>> m = merge_lines(a, b)
    >>> m["steps"], m["wall_s"], m["merged"], m["metrics"]["x/steps"], m["metrics"]["x/step_ms_p95"]
    ([10, 29], 4.0, 2, 20.0, 5.0)
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

MAX_INTERVALS = 256
"""Lines a job's ``intervals.jsonl`` holds at most (a week at one a minute is 10,080 intervals)."""

_ADDED = ("/steps", "/samples", "/epoch_s", "/optimizer_steps", "_s")
_LARGEST = ("_peak_mb", "_peak_percent", "_max", "_p95", "_p99", "slowest_step_ms")


def merge_lines(a: Mapping[str, Any], b: Mapping[str, Any]) -> dict[str, Any]:
    """Two neighbouring interval lines (``a`` first) as one (see the module docstring)."""
    wa, wb = float(a.get("wall_s") or 0.0), float(b.get("wall_s") or 0.0)
    out = dict(b)
    first, last = (a.get("steps") or [0, 0]), (b.get("steps") or [0, 0])
    out["steps"] = [first[0], last[-1]]
    out["wall_s"] = wa + wb
    out["merged"] = int(a.get("merged", 1)) + int(b.get("merged", 1))
    if "start_ns" in a:
        out["start_ns"] = a["start_ns"]
    sa, sb = a.get("samples"), b.get("samples")
    out["samples"] = sa + sb if isinstance(sa, int) and isinstance(sb, int) else None
    out["nested_s"] = float(a.get("nested_s") or 0.0) + float(b.get("nested_s") or 0.0)
    out["metrics"] = _metrics(a.get("metrics") or {}, b.get("metrics") or {}, wa, wb)
    if isinstance(a.get("account"), Mapping) and isinstance(b.get("account"), Mapping):
        out["account"] = _account(a["account"], b["account"])
    longer = a if wa > wb else b
    changes = [v for x in (a, b) for v in x.get("verdicts") or () if v.get("kind") == "CHANGE"]
    out["verdicts"] = [v for v in longer.get("verdicts") or () if v.get("kind") != "CHANGE"] + changes
    return out


def _metrics(a: Mapping[str, float], b: Mapping[str, float], wa: float, wb: float) -> dict[str, float]:
    out: dict[str, float] = {}
    for key in {**a, **b}:
        if key not in a or key not in b:
            out[key] = float(a.get(key, b.get(key, 0.0)))
        elif key.endswith(_LARGEST):
            out[key] = max(a[key], b[key])
        elif key.endswith(_ADDED) and not key.endswith("_per_s"):
            out[key] = a[key] + b[key]
        else:  # means, medians, fractions, rates: weighted by time
            out[key] = (a[key] * wa + b[key] * wb) / (wa + wb) if wa + wb > 0 else b[key]
    return out


def _account(a: Mapping[str, Any], b: Mapping[str, Any]) -> dict[str, Any]:
    def add(x: Any, y: Any) -> Any:
        if isinstance(x, Mapping) and isinstance(y, Mapping):
            return {k: add(x.get(k), y.get(k)) for k in {**x, **y}}
        if isinstance(x, (int, float)) and isinstance(y, (int, float)):
            return x + y
        return x if y is None else y

    return dict(add(a, b))


def compact(lines: list[dict[str, Any]], limit: int = MAX_INTERVALS) -> list[dict[str, Any]]:
    """``lines`` (oldest first) merged until at most ``limit``: the older half in neighbouring pairs,
    the newer half kept whole. Lines of different stages or epochs are never merged together."""
    while len(lines) > limit:
        half = len(lines) // 2
        old, new = lines[:half], lines[half:]
        merged: list[dict[str, Any]] = []
        for line in old:
            last = merged[-1] if merged else None
            if (
                last is not None
                and int(last.get("merged", 1)) <= int(line.get("merged", 1))
                and _same(last, line)
            ):
                merged[-1] = merge_lines(last, line)
            else:
                merged.append(line)
        if len(merged) == len(old):  # nothing could merge (each a stage or epoch of its own)
            return merged[len(merged) - max(0, limit - len(new)) :] + new
        lines = merged + new
    return lines


def _same(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    return all(a.get(k) == b.get(k) for k in ("stage", "epoch", "scope"))


def dumps(lines: list[dict[str, Any]]) -> str:
    """The file's text: one JSON object per line."""
    return "".join(json.dumps(line, default=str) + "\n" for line in lines)
