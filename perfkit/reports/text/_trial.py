"""A loader trial in words: each setting's rate, the pick, and what running without the model hides.

Where the trial chose the worker counts, it also says why it went past the cores (its workers
wait, and the rate kept rising) or stopped where it did: a reader who sees 8 workers on 2 cores,
or a table that ends at the cores while the rate still rose, is owed the reason.

>>> from perfkit.loaders import TrialResult, TrialSetting
>>> row = TrialSetting(0, None, False, False, 20, 40.0, 0.02, None, 1.0)
>>> text = trial_text(TrialResult("train", (row,), row, None, 30.0, 1.5, 2, 2))
>>> text.splitlines()[0]
'Loader trial of the train DataLoader, without the model: 1 setting in 1.50 s (budget 30.00 s)'
"""

from __future__ import annotations

from ..._units import format_seconds
from ...loaders import TrialResult, TrialSetting, first_round, grow
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
    lines += [_past_cores(result), _pick(result), _model(result)]
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


def _past_cores(result: TrialResult) -> str:
    """Why the trial's own worker counts went past the cores, and why they stopped where they did
    (``grow``'s rule, read again on the first round's rows); nothing where the counts were given,
    the first round did not reach the cores (the lines on what was not run say why), or it
    stopped at the cores because a count there keeps up.

    >>> def row(k, rate, busy):
    ...     return TrialSetting(k, 2 if k else None, False, False, 20, rate, 0.1, None, busy)
    >>> rows = (row(0, 2.9, 0.0), row(1, 2.8, 0.0), row(2, 5.8, 0.1), row(4, 11.6, 0.1), row(8, 23.0, 0.2))
    >>> import textwrap
    >>> said = _past_cores(TrialResult("train", rows, rows[-1], 30.0, 20.0, 19.0, 2, 2, own_counts=True))
    >>> print(textwrap.fill(said, 90))
    went past the 2 usable cores to 8 workers: the workers wait (0.1 cores busy at 2 workers)
    and the rate kept rising; stopped there while the rate was still rising: 16 workers would
    pass the most the trial tries, 4 a core (8 on 2 cores)
    >>> spent = ("4 workers: not run, the 20 s budget was spent",)
    >>> said = _past_cores(TrialResult("train", rows[:3], rows[2], 30.0, 20.0, 20.4, 2, 2, spent, True))
    >>> print(textwrap.fill(said, 90))
    the workers wait (0.1 cores busy at 2 workers) and the rate kept rising at the 2 usable
    cores, so the trial would go on to 4 workers: not run, the 20 s budget was spent (a larger
    budget tries them)
    """
    if not result.own_counts:
        return ""
    first, cores, need = first_round(result.settings), result.cores, result.need_batches_per_s
    if not first or first[-1].num_workers < cores:
        return ""
    top = first[-1]
    usable = f"the {cores} usable core{'' if cores == 1 else 's'}"
    said = ""
    if top.num_workers > cores:
        within = grow([r for r in first if r.num_workers <= cores], need, cores)
        said = f"went past {usable} to {top.label}: {within.why}; "
    growth = grow(first, need, cores)
    if growth.count is not None:  # it would have gone on: the next count was not run, or failed
        label = TrialSetting(growth.count, 2, False, top.pin_memory, 0, 0.0, 0.0).label
        why = next((s[len(label) + 2 :] for s in result.skipped if s.startswith(f"{label}: ")), "not run")
        hint = " (a larger budget tries them)" if "budget" in why else ""
        rose = "the rate still rose there" if said else f"{growth.why} at {usable}"
        return f"{said}{rose}, so the trial would go on to {label}: {why}{hint}"
    if growth.rising:  # the most a trial tries
        return f"{said}stopped there while the rate was still rising: {growth.why}"
    if said:
        return f"{said}stopped there: {growth.why}"
    if growth.why and not (need is not None and any(r.batches_per_s >= need for r in first)):
        return f"did not go past {usable}: {growth.why}"
    return ""


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
