"""The rules that judge a stage epoch, one small object each; ``RULES`` is the list a diagnosis walks.

Each rule has a name (the verdict kind it gives), the signals it reads, a threshold with the
reason for it (docs/diagnosis.md lists them), and a ``judge`` function that returns a
``Verdict``, an ``Abstention`` (a signal it needs is missing) or None (nothing to say).
Adding a rule is adding an entry to ``RULES``.
"""

from __future__ import annotations

import math
from dataclasses import replace

from .._display import display_name
from .._loader_names import loader_label
from .._rule import Outcome, Rule, Verdict, kinds
from .._units import format_seconds
from ..names import MEMORY_AVAILABLE, stage_label, step_series, wait_series
from ..stages import PARTS, Account, StageWindow, workers_needed
from ._case import Case, boundary, loader_boundary, loop_s_per_batch, main_sections, rank_sections, workers
from ._contention import CONTENTION_MIN, contention
from ._gain import Proposal, persistent_advice
from ._rules_hooks import (
    CHECKPOINT_MIN,
    HOOK_MIN,
    LOGGER_MIN,
    RESIDUAL_MIN,
    checkpoint,
    module_hook,
    residual,
    slow_logger,
)
from ._rules_ranks import STRAGGLER_MIN, straggler
from ._worker_advice import running_workers, worker_advice


def _ms(seconds: float) -> str:
    return format_seconds(seconds)


# ---- data -------------------------------------------------------------------------------------

INPUT_MIN = 0.10


def input_bound(case: Case) -> Outcome | list[Verdict]:
    a = case.window.account
    if not a.seconds("data_wait") and wait_series(case.window.loader_name) not in case.window.snapshot:
        return case.abstain(
            f"{display_name(wait_series(case.window.loader_name))} (the loader was not timed)"
        )
    if a.loaders:  # several loaders: each one's wait is its own verdict, its own claim on the part
        found = (_input_bound(case, name, sub) for name, sub in a.loaders.items())
        return [v for v in found if v is not None]
    return _input_bound(case, case.window.loader_name, a)


def _input_bound(case: Case, loader: str, a: Account) -> Verdict | None:
    """INPUT_BOUND for one loader of the stage, from its account ``a``."""
    started, first_extra = loader_boundary(case.window.snapshot, loader, a)
    waiting = max(
        0.0, a.seconds("data_wait") - started - first_extra
    )  # the epoch's start is EPOCH_BOUNDARY's
    share = waiting / case.wall_s if case.wall_s > 0 else 0.0
    if len(case.window.ranks) > 1:  # the wait every rank has; a slow rank's excess is STRAGGLER's
        share = min(
            share, *(_rank_waiting(r.account.loaders.get(loader, r.account)) for r in case.window.ranks)
        )
        waiting = share * case.wall_s
    if share < INPUT_MIN:
        return None
    stage = case.stage
    evidence = {"data_wait_fraction": share, "data_wait_s": waiting}
    subject, its = loader, "its data loader"
    if case.window.account.loaders:  # one of several: named by index and its dataset's class
        subject = loader_label(loader, case.window.loader_name, a.dataset)
        its = f"its loader {subject.split(' loader ', 1)[1]}"
    message = f"{stage_label(stage)} waits for {its} {share:.0%} of the epoch"
    if len(case.window.ranks) > 1:
        message += " on every rank"
    w = workers(case.window.snapshot, loader)
    if w is None:
        action = (
            "the batches are made in this process (no DataLoader workers, or the loader is not "
            "instrumented): give the DataLoader num_workers > 0"
        )
        advice = _advice(case, loader, waiting, share, action)
        action = advice.said
        inside = a.subjects.get("wait_sections", {})
        if inside:  # the user's sections that made the batches, in the wait itself
            name, seconds = max(inside.items(), key=lambda kv: kv[1])
            total = a.seconds("data_wait")
            message += (
                f"; of its {_ms(total)} of waiting, {_ms(seconds)} ({seconds / total:.0%}) was "
                f"{display_name(name)}, run in this process"
            )
            evidence["wait_section_s"] = seconds
            action += f"; or make {display_name(name)} cheaper"
    else:
        evidence |= {
            "worker_batch_s": w.batch_s,
            "workers": float(w.count),
            "worker_cores": float(case.cores),
        }
        message += f"; each batch takes {_ms(w.batch_s)} in a worker"
        stalled = a.subjects.get("stalled_on", {})
        if stalled:  # which worker-side stage the loop was waiting for, wait by wait
            stage_name, seconds = max(stalled.items(), key=lambda kv: kv[1])
            message += (
                f"; of its {_ms(a.seconds('data_wait'))} of waiting, {_ms(seconds)} was "
                f"{display_name(stage_name)} running in the workers"
            )
            evidence["stalled_on_top_s"] = seconds
        elif w.top_section is not None and w.top_section.self_s > 0:
            share_of_batch = w.top_section.self_s / (w.batch_s * w.batches) if w.batch_s > 0 else 0.0
            message += f", {share_of_batch:.0%} of it in {display_name(w.top_section.name)}"
            evidence["top_worker_section_fraction"] = share_of_batch
        loop_s = loop_s_per_batch(case)
        needed = workers_needed(w.batch_s, loop_s) if loop_s else None
        if needed is not None:
            evidence["workers_needed"] = float(needed)
        advice = running_workers(case, loader, waiting, share, w.count, w.batch_s)
        action = advice.said
        if not advice.change and w.top_section is not None:
            action = action.replace("per-batch work", f"per-batch work ({display_name(w.top_section.name)})")
    return case.verdict(
        share,
        message,
        action,
        subject=subject,
        evidence=evidence,
        change=dict(advice.change),
        gain=advice.gain,
    )


def _advice(case: Case, loader: str, waiting_s: float, share: float, action: str) -> Proposal:
    """The worker advice with its gain for the stage's own loader, whose settings and CPU split the
    run recorded; another loader of the stage keeps its plain action (no change, no gain)."""
    if loader != case.window.loader_name:
        return Proposal({}, None, action)
    return worker_advice(case, waiting_s, share, action)


def _rank_waiting(a: Account) -> float:
    """One rank's share of its epoch spent waiting for batches past the epoch's start."""
    start = a.subjects.get("data_wait", {}).get("iter", 0.0) + (a.first_batch_extra_s or 0.0)
    return max(0.0, a.seconds("data_wait") - start) / a.wall_s if a.wall_s > 0 else 0.0


BOUNDARY_MIN = 0.05


def epoch_boundary(case: Case) -> Outcome:
    started, first = boundary(case)
    share = (started + first) / case.wall_s if case.wall_s > 0 else 0.0
    if share < BOUNDARY_MIN:
        return None
    message = (
        f"the start of each {stage_label(case.stage)} epoch costs {share:.0%}: {_ms(started)} to start "
        f"the loader (iter(), worker start-up) and {_ms(first)} more for the first batch than making a "
        "batch takes"
    )
    w = workers(case.window.snapshot, case.window.loader_name)
    keep = persistent_advice(case, started, first) if w is not None else None
    if keep is not None and not keep.change:  # kept already: each epoch's first batch is made anew
        action = (
            "the workers are kept between epochs already (persistent_workers=True), but each epoch's "
            "first batch is made while the loop waits (the others while it computes): make the "
            "per-batch work cheaper"
        )
    elif started >= first:
        action = (
            "keep the workers between epochs (persistent_workers=True): they are started again each epoch"
        )
    elif w is not None:  # the workers' first batch waited past their normal time per batch
        action = (
            "each worker spends that before its first batch (a slow worker_init_fn, the dataset opened in "
            "every worker): make it cheaper, or keep the workers between epochs (persistent_workers=True) "
            "so it runs once"
        )
    else:
        action = (
            "the first batch of each pass takes that much longer than the others (files opened or a cache "
            "filled at every pass): do it once, before the first epoch"
        )
    evidence = {"loader_iter_s": started, "first_batch_extra_s": first}
    if keep is None or not keep.change:
        return case.verdict(share, message, action, subject=case.window.loader_name, evidence=evidence)
    return case.verdict(
        share,
        message,
        f"{action}; {keep.said}",
        subject=case.window.loader_name,
        evidence=evidence,
        change=dict(keep.change),
        gain=keep.gain,
    )


SETUP_MIN = 0.10


def loader_setup(case: Case) -> Outcome:
    setups = case.window.account.subjects.get("loader_setup", {})  # empty: no loader was built this epoch
    share = sum(setups.values()) / case.wall_s if case.wall_s > 0 else 0.0
    if share < SETUP_MIN:
        return None
    stage, seconds = max(setups.items(), key=lambda kv: kv[1])
    message = f"building the {stage_label(stage)} loaders takes {share:.0%} of the epoch ({_ms(seconds)})"
    action = (
        f"build the {stage} dataset once, outside the *_dataloader() hook, or stop reloading it each epoch"
    )
    return case.verdict(share, message, action, subject=stage, evidence={"loader_setup_s": seconds})


# ---- compute ------------------------------------------------------------------------------------

COMPUTE_MIN = 0.50
SECTION_MIN = 0.10


def compute_bound(case: Case) -> Outcome:
    if step_series(case.stage) not in case.window.snapshot:
        return case.abstain(f"{display_name(step_series(case.stage))} (no step was timed)")
    account = case.window.account
    # Under DDP the step holds each rank's wait for the others in the gradient all-reduce: where
    # that was timed, it is not compute (a straggler's cost, STRAGGLER's to claim)
    compute = account.compute_s()
    if compute is None:
        share = case.fraction("step")
    else:
        share = compute / account.wall_s if account.wall_s > 0 else 0.0
    if share < COMPUTE_MIN:
        return None
    sections = [s for s in rank_sections(case) if s.self_s / case.rank_wall_s >= SECTION_MIN]
    if sections and sections[0].self_s >= 0.5 * account.seconds("step"):
        return None  # one section explains the step: SLOW_SECTION names it
    message = f"the step's own compute is {share:.0%} of the {stage_label(case.stage)} epoch"
    if compute is not None and compute < account.seconds("step"):
        wait = (account.seconds("step") - compute) / account.wall_s
        message += f" (its {wait:.0%} waiting for the other ranks in the gradient all-reduce left out)"
    action = (
        "the loop is compute-bound: speed up the model (mixed precision, a larger batch, torch.compile) "
        "or time its parts with perfkit.section to see which one"
    )
    return case.verdict(share, message, action, evidence={"step_fraction": share})


def slow_section(case: Case) -> Outcome:
    sections = rank_sections(case)  # the mean rank's: each rank's time against its own epoch
    wall = case.rank_wall_s
    if not sections:
        return None
    top = sections[0]
    share = top.self_s / wall if wall > 0 else 0.0
    if share < SECTION_MIN:
        return None
    where = " > ".join(top.path)
    over = f"the {stage_label(case.stage)} epoch"
    calls = f"{top.count} calls"
    if case.rank_count > 1:
        over += f" on the mean of {case.rank_count} ranks"
        calls += " each"
    own = f"{_ms(top.self_s)} of its own time over {calls}"
    message = f"section {display_name(where)} takes {share:.0%} of {over} ({own})"
    action = f"make {display_name(top.name)} cheaper: it is the largest part of the loop you timed"
    evidence = {"self_s": top.self_s, "calls": float(top.count)}
    if case.rank_count > 1:
        evidence |= {"ranks": float(case.rank_count), "rank_wall_s": wall}
    return case.verdict(share, message, action, subject=where, evidence=evidence)


# ---- other components -------------------------------------------------------------------------

CALLBACK_MIN = 0.05


def callback_overhead(case: Case) -> Outcome:
    owners = case.window.account.subjects.get("callbacks")
    if not owners:  # no component's hook was timed: nothing to judge
        return None
    owner, seconds = max(owners.items(), key=lambda kv: kv[1])
    share = seconds / case.wall_s if case.wall_s > 0 else 0.0
    if share < CALLBACK_MIN:
        return None
    label = stage_label(case.stage)
    message = f"callback {display_name(owner)} takes {share:.0%} of the {label} epoch in its hooks"
    action = (
        f"make {display_name(owner)}'s hooks cheaper or run them less often (every N steps, at epoch end)"
    )
    return case.verdict(share, message, action, subject=owner, evidence={"hook_s": seconds})


# ---- stages against each other ------------------------------------------------------------------

EVAL_MIN_RATIO = 1.5


def eval_slower_than_train(case: Case) -> Outcome:
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
    if ratio < EVAL_MIN_RATIO:
        return None
    part, extra = _explaining_part(w, t, w.samples, t.samples)
    message = (
        f"{stage_label(w.stage)} takes {ratio:.1f}x training's time per sample "
        f"({_ms(mine)} against {_ms(theirs)}); {part} explains most of the difference "
        f"({_ms(extra)} more per sample)"
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


# ---- over epochs ------------------------------------------------------------------------------------

REGRESSION_MIN = 0.10
NOISE_SIGMAS = 3.0


def regression(case: Case) -> Outcome:
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
    if grew <= noise or grew < REGRESSION_MIN * before.mean_s:
        return None
    share = grew * after.count / case.wall_s if case.wall_s > 0 else 0.0
    message = (
        f"{stage_label(case.stage)} steps got slower from epoch {base.epoch} to {case.window.epoch}: "
        f"{_ms(before.mean_s)} -> {_ms(after.mean_s)} a step (noise band {_ms(noise)})"
    )
    action = "something grows with the epochs: a cache, a list kept across steps, data that gets harder"
    evidence = {"step_mean_before_s": before.mean_s, "step_mean_after_s": after.mean_s, "noise_s": noise}
    return case.verdict(share, message, action, evidence=evidence)


MEMORY_MIN = 0.20
HORIZON_S = 24 * 3600.0
"""A leak that would exhaust the memory still free within a day of training at the current pace
is a risk to act on now, whatever time it costs: its verdict is ``critical`` and ranks first."""


def memory_growth(case: Case) -> Outcome:
    # Memory belongs to the process, not to a stage: judged once, on training's epochs when there are.
    if not case.history or (case.train is not None and case.stage != "train"):
        return None
    gauge = "process.rss_mb"
    first, last = case.history[0].snapshot.gauges.get(gauge), case.window.snapshot.gauges.get(gauge)
    if first is None or last is None:
        return case.abstain(f"{gauge} (no resource sampler)")
    growth = last.max / first.max - 1 if first.max > 0 else 0.0
    if growth < MEMORY_MIN:
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


RULES: tuple[Rule[Case], ...] = (
    Rule("INPUT_BOUND", ("data_wait", "worker_batch"), INPUT_MIN,
         "below a tenth of the epoch, more workers buy little and transfer noise dominates", input_bound,
         claims="data_wait"),
    Rule("EPOCH_BOUNDARY", ("loader_iter", "first_batch"), BOUNDARY_MIN,
         "a twentieth of every epoch spent starting over is worth a persistent worker pool", epoch_boundary,
         claims="data_wait"),
    Rule("LOADER_SETUP", ("loader_setup",), SETUP_MIN,
         "building loaders is one-off work: a tenth of an epoch means it is rebuilt too often", loader_setup,
         claims="loader_setup"),
    Rule("CONTENTION", ("step", "train.loop.cpu_s", "train.data.fetch_cpu_s"), CONTENTION_MIN,
         "a tenth of the epoch in steps slowed past their median, with the cores oversubscribed",
         contention, claims="step"),
    Rule("COMPUTE_BOUND", ("step",), COMPUTE_MIN,
         "when the step's own compute is most of the epoch, nothing else can win more", compute_bound,
         claims="step"),
    Rule("SLOW_SECTION", ("sections",), SECTION_MIN,
         "a single timed block worth a tenth of the epoch is the first place to look", slow_section,
         claims="step"),
    Rule("CALLBACK_OVERHEAD", ("callback hooks",), CALLBACK_MIN,
         "a callback is meant to watch training: a twentieth of the epoch is a tax", callback_overhead,
         claims="callbacks"),
    Rule("CHECKPOINT", ("checkpoint callback hooks",), CHECKPOINT_MIN,
         "saving is the price of resuming; past a tenth of the epoch it is saved too often or too much",
         checkpoint, claims="callbacks"),
    Rule("MODULE_HOOK", ("model hooks",), HOOK_MIN,
         "the model's hook outside the step is user code: a tenth of the epoch is the first place to look",
         module_hook, claims="module_hooks"),
    Rule("SLOW_LOGGER", ("logger methods",), LOGGER_MIN,
         "a logger is meant to watch training: a twentieth of the epoch is a tax", slow_logger,
         claims="loggers"),
    Rule("EVAL_SLOWER_THAN_TRAIN", ("samples", "training window"), EVAL_MIN_RATIO,
         "evaluation does less work per sample than training (no backward): 1.5x is past any normal cost",
         eval_slower_than_train),
    Rule("STRAGGLER", ("ranks",), STRAGGLER_MIN,
         "every rank waits for the slowest in each collective: a tenth of an epoch is lost on all of them",
         straggler),
    Rule("REGRESSION", ("step",), REGRESSION_MIN,
         "a change must exceed the steps' own noise (3 standard errors) and a tenth of the step", regression),
    Rule("MEMORY_GROWTH", ("process.rss_mb",), MEMORY_MIN,
         "a fifth more memory between epochs of the same work is a leak, not noise", memory_growth),
    Rule("RESIDUAL", ("other",), RESIDUAL_MIN,
         "a tenth of the epoch that no timer covers is too big to leave unnamed", residual, claims="other"),
)  # fmt: skip

KINDS = kinds(RULES)
"""Every kind of run verdict, as ``Verdict.kind`` spells it: declared once, by its rule above."""
