"""The rules that compare an epoch with others: with training's (EVAL_SLOWER_THAN_TRAIN), with its
stage's earlier epochs (REGRESSION, MEMORY_GROWTH).

The first two are symptoms: they say that time grew, and which part it grew in; where a cause
claims that part, the partition folds them into its verdict. A leak slows the steps without
claiming their seconds: MEMORY_GROWTH's message joins the step's verdict where the steps slowed.
"""

from __future__ import annotations

import math
from dataclasses import replace

from ..._rule import Outcome
from ..._units import format_seconds
from ...names import MEMORY_AVAILABLE, display_name, stage_label, step_series
from ...stages import PARTS, StageWindow
from .._case import Case, main_sections
from ._rule import Rule


def eval_slower_than_train(case: Case, minimum: float) -> Outcome:
    if case.stage == "train":
        return None
    w, t = case.window, case.train
    if t is None or not t.samples or not w.samples:
        return case.abstain("a training window with samples to compare with")
    mine = w.wall_s / w.samples
    # the reference the metrics and the console block use, where the window kept it: one ratio,
    # the same wherever it is printed
    theirs = w.reference_s_per_sample or t.wall_s / t.samples
    ratio = mine / theirs if theirs > 0 else math.inf
    if ratio < minimum:
        return None
    part, extra = _explaining_part(w, t, w.samples, t.samples)
    message = (
        f"{stage_label(w.stage)} takes {ratio:.1f}x training's time per sample "
        f"({format_seconds(mine)} against {format_seconds(theirs)}); {part} explains most of the difference "
        f"({format_seconds(extra)} more per sample)"
    )
    action = {
        "data wait": "its data loading is the difference: give its loader more workers or a cheaper collate",
        "step": "its step is the difference: look at the sections inside the evaluation step",
        "callbacks": "other callbacks' hooks are the difference",
        "loader setup": "building its loaders is the difference: build them once",
        "other": "the difference is outside the measured parts (the framework's loop, logging)",
    }.get(part.split(" (")[0], f"make {part} cheaper")
    share = 1 - 1 / ratio
    evidence = {"time_per_sample_ratio": ratio, "s_per_sample": mine, "train_s_per_sample": theirs}
    return case.verdict(share, message, action, subject=part, evidence=evidence)


def _explaining_part(w: StageWindow, t: StageWindow, n_w: int, n_t: int) -> tuple[str, float]:
    """The account part (or main-process section) whose time per sample grew most against training's."""
    best, extra = "other", -math.inf
    for part in PARTS:
        grew = w.account.seconds(part) / n_w - t.account.seconds(part) / n_t
        if grew > extra:
            best, extra = part.replace("_", " "), grew
    if best == "step":
        sections = [s for s in main_sections(w.snapshot) if s.self_s / n_w > 0.5 * extra]
        if sections:
            best = f"step ({display_name(sections[0].name)})"
    return best, extra


NOISE_SIGMAS = 3.0


def regression(case: Case, minimum: float) -> Outcome:
    if not case.history:
        return None
    # Epoch 0 warms up (compilation, caches, the first worker start): compare with the next one.
    base = case.history[1] if len(case.history) > 1 else case.history[0]
    name = step_series(case.stage)
    before, after = base.snapshot.get(name), case.window.snapshot.get(name)
    if before is None or after is None or before.count < 2 or after.count < 2:
        return case.abstain(f"{display_name(name)} in two epochs with at least two steps each")
    grew = after.mean_s - before.mean_s
    noise = NOISE_SIGMAS * math.sqrt(before.std_s**2 / before.count + after.std_s**2 / after.count)
    if grew <= noise or grew < minimum * before.mean_s:
        return None
    share = grew * after.count / case.wall_s if case.wall_s > 0 else 0.0
    message = (
        f"{stage_label(case.stage)} steps got slower from epoch {base.epoch} to {case.window.epoch}: "
        f"{format_seconds(before.mean_s)} -> {format_seconds(after.mean_s)} a step "
        f"(noise band {format_seconds(noise)})"
    )
    action = "something grows with the epochs: a cache, a list kept across steps, data that gets harder"
    evidence = {"step_mean_before_s": before.mean_s, "step_mean_after_s": after.mean_s, "noise_s": noise}
    return case.verdict(share, message, action, evidence=evidence)


HORIZON_S = 24 * 3600.0
"""A leak that would exhaust the memory still free within a day of training at the current pace
is a risk to act on now, whatever time it costs: its verdict is ``critical`` and ranks first."""


def memory_growth(case: Case, minimum: float) -> Outcome:
    # Memory belongs to the process, not to a stage: judged once, on training's epochs when there are.
    if not case.history or (case.train is not None and case.stage != "train"):
        return None
    gauge = "process.rss_mb"
    first, last = case.history[0].snapshot.gauges.get(gauge), case.window.snapshot.gauges.get(gauge)
    if first is None or last is None:
        return case.abstain(f"{gauge} (no resource sampler)")
    growth = last.max / first.max - 1 if first.max > 0 else 0.0
    if growth < minimum:
        return None
    epochs = max(1, case.window.epoch - case.history[0].epoch)
    per_epoch = (last.max - first.max) / epochs
    message = (
        f"process memory peak grew {growth:.0%} from {stage_label(case.stage)} epoch "
        f"{case.history[0].epoch} to {case.window.epoch} ({first.max:,.0f} MB -> {last.max:,.0f} MB)"
    )
    evidence = {"rss_peak_growth": growth, "rss_growth_mb_per_epoch": per_epoch}
    runway_s = math.inf
    for where, grows, free in _memories(case, per_epoch, epochs):
        runway = free / grows
        if runway * case.wall_s >= runway_s:
            continue
        runway_s = runway * case.wall_s
        evidence |= {"memory_free_mb": free, "epochs_to_exhaustion": runway}
        projection = (
            f"; at {grows:,.0f} MB an epoch, the {free:,.0f} MB still free {where} would run out in "
            f"{runway:,.1f} epochs ({format_seconds(runway_s)} of training at this pace)"
        )
    if runway_s < math.inf:
        message += projection
    action = "something is kept across steps or epochs (outputs, tensors with history, a cache)"
    v = case.verdict(0.0, message, action, evidence=evidence)
    return replace(v, severity="critical") if runway_s <= HORIZON_S else v


def _memories(case: Case, host_mb_per_epoch: float, epochs: int) -> list[tuple[str, float, float]]:
    """Each memory the run grows into: where, MB gained per epoch, MB still free (the least seen in
    the epoch). Host RAM from the sampler's free memory; each GPU from NVML's used and total."""
    now, then = case.window.snapshot.gauges, case.history[0].snapshot.gauges
    out = []
    free = now.get(MEMORY_AVAILABLE)
    if free is not None and host_mb_per_epoch > 0:
        out.append(("in host memory", host_mb_per_epoch, free.min))
    for name, used in now.items():
        if not name.endswith(".memory_used_mb") or name not in then:
            continue
        device = name[: -len(".memory_used_mb")]
        total = now.get(device + ".memory_total_mb")
        grows = (used.max - then[name].max) / epochs
        if total is not None and grows > 0:
            out.append((f"on {device}", grows, max(0.0, total.max - used.max)))
    return out


RULES = (
    Rule("EVAL_SLOWER_THAN_TRAIN", ("samples", "training window"), 1.5,
         "evaluation does less work per sample than training (no backward): 1.5x is past any normal cost",
         eval_slower_than_train, generality=3, symptom=True),
    Rule("REGRESSION", ("step",), 0.10,
         "a change must exceed the steps' own noise (3 standard errors) and a tenth of the step", regression,
         generality=3, symptom=True, explained_by="step"),
    Rule("MEMORY_GROWTH", ("process.rss_mb",), 0.20,
         "a fifth more memory between epochs of the same work is a leak, not noise", memory_growth,
         slows="step"),
)  # fmt: skip
