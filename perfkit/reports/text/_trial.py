"""A loader trial in words: each setting's rate, the pick, and what running without the model hides.

>>> from perfkit.loaders import TrialResult, TrialSetting
>>> row = TrialSetting(0, None, False, False, 20, 40.0, 0.02, None, 1.0)
>>> text = trial_text(TrialResult("train", (row,), row, None, 30.0, 1.5, 2, 2))
>>> text.splitlines()[0]
'Loader trial of the train DataLoader, without the model: 1 setting in 1.50 s (budget 30.00 s)'
"""

from __future__ import annotations

from ..._units import format_seconds
from ...loaders import TrialResult, TrialSetting
from ._table import table


def trial_text(result: TrialResult, *, width: int = 100) -> str:
    """``perfkit trial``'s text: the table, the pick, the model's part, and what was not run."""
    n = len(result.settings)
    lines = [
        f"Loader trial of the {result.loader} DataLoader, without the model: "
        f"{n} setting{'s' if n != 1 else ''} in {format_seconds(result.elapsed_s)} "
        f"(budget {format_seconds(result.budget_s)})"
    ]
    if result.settings:
        rows = [_row(s, s is result.best) for s in result.settings]
        headers = ["batches/s", "first batch", "worker USS", "CPU cores", "setting"]
        lines += ["  " + line for line in table(headers, rows, width=width - 2, align="rrrr")]
    lines += [_pick(result), _model(result)]
    lines += [f"not run: {s}" for s in result.skipped]
    return "\n".join(line for line in lines if line)


def _row(s: TrialSetting, best: bool) -> list[str]:
    uss = "-" if s.worker_uss_mb is None else f"{s.worker_uss_mb:.0f} MB"
    cores = "-" if s.cpu_cores is None else f"{s.cpu_cores:.1f}"
    label = s.label + ("  <- pick" if best else "")
    return [f"{s.batches_per_s:.1f}", format_seconds(s.start_s), uss, cores, label]


def _pick(result: TrialResult) -> str:
    best, need = result.best, result.need_batches_per_s
    if best is None:
        return "no setting finished within the budget: give a larger budget_s (--budget-s)"
    said = f"pick: {best.label} ({best.batches_per_s:.1f} batches/s)"
    if need is None:
        return f"{said}: the fewest workers within 10% of the fastest (give the loop's rate to pick by it)"
    consumed = f"the {need:.1f} batches/s the training loop consumed"
    if result.keeps_up:
        return f"{said}: the smallest setting that keeps up with {consumed}"
    return f"{said}: no setting keeps up with {consumed}; this is the fastest"


def _model(result: TrialResult) -> str:
    """How the model's own CPU use changes the picture: the trial had the cores to itself."""
    best, cores, threads = result.best, result.cores, result.torch_threads
    used = None if best is None else best.cpu_cores
    busy = "" if used is None else f" (the pick kept {used:.1f} cores busy)"
    cores_said = f"{cores} core{'s' if cores != 1 else ''}"
    threads_said = f"{threads} torch thread{'s' if threads != 1 else ''}"
    return (
        f"These rates are the loader's alone, on {cores_said} it did not share. In training the model's "
        f"{threads_said} want those cores too: workers that compute{busy} compete with them, and where the "
        f"loader's CPU use plus the model's exceeds {cores_said} both slow down (fewer workers or fewer "
        "torch threads then do better than the table says); workers that wait on a disk, a network or a "
        "sleep use little CPU and keep their rate."
    )
