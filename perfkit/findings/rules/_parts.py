"""The rules that read one level below the account: the step's parts and where a wait for data went.

The step splits into forward, backward, the optimizer step, zero_grad and the rest
(``Account.subjects["step"]``); a wait for a batch into what the main process did meanwhile -- the
sampler, rebuilding a worker's batch, pinning -- and the time blocked on a worker
(``subjects["wait_parts"]``), and each worker's batches have their own wall and CPU time. Each rule
names one thing, so the partition serves it before the general verdict on the part it claims
(OPTIMIZER_STEP and SLOW_BACKWARD before COMPUTE_BOUND; SLOW_SAMPLER, BATCH_TRANSFER and
SLOW_WORKER before INPUT_BOUND), and nothing is claimed twice. A gain is stated only where what
was measured bounds it: a sampler made free saves the time it ran in the main process's wait; one
tensor a batch saves the shared-memory handles the batches opened, all but each batch's slowest,
and the loop then goes no faster than the workers make batches (BATCH_TRANSFER); more workers for
one that waits save the pace it sets, down to the loop's own (SLOW_WORKER). Where the change is
code and nothing measured bounds it (an optimizer's implementation, a computing worker's cheaper
batches), the verdict says what to change, how much of the epoch is at stake and why no gain is
stated, not a guess of how much it will save.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..._rule import Outcome, Verdict
from ..._snapshot import Snapshot
from ..._units import format_seconds, plural
from ...names import (
    BACKWARD,
    COLLECTIVE_WAIT,
    FORWARD,
    RECEIVE_HANDLE,
    STEP_PART,
    SYNC_WAIT,
    WORKER_WAIT,
    display_name,
    fetch_cpu_series,
    fetch_queued_series,
    fetch_series,
    setting_gauge,
    stage_label,
    step_part_series,
    wait_part_series,
)
from ...stages import Account
from .._case import Case
from ..workers import Proposal, facts, loaders, workers
from ..workers._facts import COMPUTES, WAITING_CORE
from ..workers._model import CONTENTION_MARGIN, IPC_S, NOISE, START_S
from ..workers._words import gain_words, memory_words, not_worth, unstable
from ._rule import Rule

BACKWARD_OVER_FORWARD = 2.5
"""A backward pass costs about twice its forward (two matmuls per one, per layer); past this it holds
something the forward does not (a custom Function, a gradient hook, recomputed activations)."""
SLOW_WORKER_RATIO = 1.5
"""One worker's batches this much slower than the others' is that worker's, not the loader's."""
CROWDED = 0.2
"""A worker whose batches spent this share of their time queued for a core (ready to run, none
free) ran on a machine whose cores are taken: no core is free for another computing worker, whatever
this process's own CPU seconds say (other jobs take cores too: a worker computing every moment it ran
measured 41% CPU and 60% queued here, with other jobs on both cores)."""
QUEUED_SAID = 0.05
"""Time queued for a core is said beside a worker's CPU share from this share of its batches' time."""


def own_s(a: Account, part: str) -> float:
    """A step part's own seconds: less the rank's waits in collectives there (COMMUNICATION_BOUND's),
    and for backward DDP's wait for the gradient all-reduce (``sync_wait``, ends the backward)."""
    waits = a.subjects.get(COLLECTIVE_WAIT, {}).get(part, 0.0)
    if part == BACKWARD:
        waits += a.overlays.get(SYNC_WAIT, 0.0)
    return max(0.0, a.subjects.get(STEP_PART, {}).get(part, 0.0) - waits)


def optimizer_step(case: Case, minimum: float) -> Outcome:
    a = case.window.account
    seconds = own_s(a, "optimizer")
    share = seconds / a.wall_s if a.wall_s > 0 else 0.0
    if share < minimum:
        return None
    stats = case.window.snapshot.get(step_part_series(case.stage, "optimizer"))
    steps = stats.count if stats is not None else 0
    each = f"{format_seconds(seconds / steps)} in each of {steps} steps, " if steps else ""
    of_step = seconds / a.seconds("step") if a.seconds("step") > 0 else 0.0
    message = (
        f"the optimizer step takes {share:.0%} of the {stage_label(case.stage)} epoch "
        f"({each}{of_step:.0%} of the step's own time)"
    )
    action = (
        "make the optimizer step cheaper: its fused or foreach implementation (torch.optim.AdamW(..., "
        "fused=True) on CUDA, foreach=True elsewhere), fewer parameter groups; extra work in optimizer_step "
        "(an EMA of the weights, a clip over every parameter) every N steps or on a side stream; mixed "
        "precision or torch.compile of the model do not touch it"
    )
    evidence = {"optimizer_s": seconds, "optimizer_fraction": share, "of_step": of_step}
    return case.verdict(share, message, action, subject="optimizer", evidence=evidence)


def slow_backward(case: Case, minimum: float) -> Outcome:
    a = case.window.account
    backward, forward = own_s(a, BACKWARD), own_s(a, FORWARD)  # their waits in collectives left out
    share = backward / a.wall_s if a.wall_s > 0 else 0.0
    if share < minimum or backward < BACKWARD_OVER_FORWARD * forward:
        return None
    ratio = f"{backward / forward:.1f}x its forward" if forward > 0 else "with no forward timed"
    message = (
        f"the backward pass takes {share:.0%} of the {stage_label(case.stage)} epoch, {ratio} "
        f"(a backward usually costs about twice its forward)"
    )
    action = (
        "find what backward does that forward does not -- a custom autograd Function, a hook on the "
        "gradients, activation checkpointing recomputing the forward: one profiler window on a training "
        f"epoch names the op (Lightning: ProfilerCallback(profile_epochs=[{case.window.epoch + 1}], "
        f"stages=['train']); a script: perfkit.torch.ProfilerWindows(epochs=[{case.window.epoch + 1}], "
        "stages=['train']) in perfkit.window(..., listeners=[...]))"
    )
    evidence = {"backward_s": backward, "forward_s": forward, "backward_fraction": share}
    return case.verdict(share, message, action, subject="backward", evidence=evidence)


def slow_sampler(case: Case, minimum: float) -> Outcome:
    a = case.window.account
    seconds = a.subjects.get("wait_parts", {}).get("sampler", 0.0)
    share = seconds / a.wall_s if a.wall_s > 0 else 0.0
    if share < minimum:
        return None
    batches = max(1, case.steps)
    message = (
        f"the sampler takes {share:.0%} of the {stage_label(case.stage)} epoch "
        f"({format_seconds(seconds / batches)} a batch), in the main process: the DataLoader draws every "
        "batch's indices there, with or without workers, so more workers cannot hide it"
    )
    action = (
        "make the sampler cheaper: precompute the epoch's indices in its __iter__ (one array, then yield "
        "slices), vectorize what it computes per index (numpy, torch.randperm), or hand the DataLoader a "
        "batch_sampler that yields whole index lists"
    )
    return case.verdict(
        share,
        message,
        action,
        subject="sampler",
        evidence={"sampler_s": seconds, "sampler_fraction": share},
        gain=(share * 0.9, share),  # it runs alone in the loop's wait: made free, its time is saved
    )


def sampler_advice(case: Case, v: Verdict) -> Proposal:
    """SLOW_SAMPLER's action with its gain in words (the change is code: no setting to change)."""
    return Proposal({}, v.gain, _with_gain(case, v.action, v.gain))


@dataclass(frozen=True)
class Transfer:
    """What moving the workers' batches into the main process cost in a stage epoch."""

    receive_s: float  # rebuilding the workers' batches (unpickling, opening their handles)
    pin_s: float  # pinning them in the loop's thread
    batches: int  # batches the loop was handed
    handles: int  # shared-memory handles opened rebuilding them: the storages (tensors) they held
    handle_s: float  # the time opening them
    kept_s: float  # of ``handle_s``, each batch's slowest handle: what one handle a batch still costs

    @property
    def per_batch(self) -> float:
        """Handles a batch: the tensors (storages) each batch came as."""
        return self.handles / self.batches if self.batches else 0.0

    @property
    def tensors(self) -> str:
        """``40 tensors``, ``one tensor``."""
        return "one tensor" if round(self.per_batch) <= 1 else f"{self.per_batch:.0f} tensors"


def transfer(case: Case) -> Transfer:
    """The stage epoch's transfer, over its loaders."""
    where = case.window.account.subjects.get("wait_parts", {})
    snap = case.window.snapshot
    handles, handle_s, kept_s = 0, 0.0, 0.0
    for name, _ in loaders(case):
        opened = snap.get(wait_part_series(name, RECEIVE_HANDLE))
        if opened is not None and opened.count:
            handles += opened.count
            handle_s += opened.total_s
            kept_s += opened.total_s * _slowest_share(snap, name)
    batches = case.steps // max(1, len(case.window.ranks))
    return Transfer(where.get("receive", 0.0), where.get("pin", 0.0), batches, handles, handle_s, kept_s)


def _slowest_share(snap: Snapshot, loader: str) -> float:
    """Of the handle time of ``loader``'s retained records, the share of each batch's slowest handle
    (the one a batch of one tensor still opens: the first of a batch often waits for the worker that
    sent it to answer: 0.3-9 ms against 0.2-1 ms for the rest of 40, measured here); 1 where the handles
    cannot be matched to their batches."""
    if wait_part_series(loader, "receive") not in snap:
        return 1.0
    got = snap.data(wait_part_series(loader, "receive"))
    opened = snap.data(wait_part_series(loader, RECEIVE_HANDLE))
    kept = every = 0.0
    for thread in np.unique(opened.threads):
        starts = np.sort(got.starts_ns[got.threads == thread])
        at = opened.threads == thread
        batch = np.searchsorted(starts, opened.starts_ns[at], side="right") - 1
        inside = batch >= 0
        took = opened.durations_ns[at][inside].astype(np.float64)
        slowest = np.zeros(len(starts))
        np.maximum.at(slowest, batch[inside], took)
        kept, every = kept + float(slowest.sum()), every + float(took.sum())
    return kept / every if every > 0 else 1.0


def batch_transfer(case: Case, minimum: float) -> Outcome:
    a = case.window.account
    t = transfer(case)
    seconds = t.receive_s + t.pin_s
    share = seconds / a.wall_s if a.wall_s > 0 else 0.0
    if share < minimum:
        return None
    batches = max(1, case.steps)
    parts = [f"rebuilding the workers' batches {format_seconds(t.receive_s)}"] if t.receive_s else []
    if t.handles:
        each = "each opened from its own" if round(t.per_batch) > 1 else "opened from its"
        parts[-1:] = [f"{parts[-1]}, {t.tensors} a batch, {each} shared-memory handle"]
    parts += [f"pinning them {format_seconds(t.pin_s)}"] if t.pin_s else []
    message = (
        f"moving batches into the main process takes {share:.0%} of the {stage_label(case.stage)} epoch "
        f"({format_seconds(seconds / batches)} a batch: {'; '.join(parts)})"
    )
    evidence = {"receive_s": t.receive_s, "pin_s": t.pin_s, "transfer_fraction": share}
    if t.handles:
        evidence |= {"handles_per_batch": t.per_batch, "handle_s": t.handle_s}
    return case.verdict(share, message, FEWER_TENSORS, subject="transfer", evidence=evidence)


FEWER_TENSORS = (
    "send less per batch: fewer, larger tensors (one stacked tensor rather than a list or dict of many "
    "small ones, each of which comes through its own shared-memory handle), a smaller dtype (uint8 "
    "images, converted on the device), nothing the step does not use"
)
"""BATCH_TRANSFER's action where the run did not say how many tensors a batch holds."""


def transfer_advice(case: Case, v: Verdict) -> Proposal:
    """BATCH_TRANSFER's action, with the gain of one tensor a batch where the run counted the handles.

    The change is code (the dataset or collate_fn stacks what it returns), so no setting is changed;
    what it saves is bounded by what was measured. The low end saves every handle but each batch's
    slowest (the one a single tensor still opens), keeps the rest of the rebuilding (unpickling the
    batch's structure), and lets the loop go no faster than the workers make batches (their time
    per batch over their count, with the margins of ``workers._model``: moving each batch, the
    contention the averages hide). The high end makes the whole rebuilding free, still no faster
    than the workers. Freeing the batch's tensors (in the step) and the workers' own sending
    (putting each tensor in shared memory: time the loop waits for a worker) shrink too and are in
    neither end: the saving measured can pass the high end.
    """
    t = transfer(case)
    pin = (
        f"; pinning takes {format_seconds(t.pin_s)} in the loop's thread: with num_workers > 0 torch pins "
        "in a thread of its own (no gain stated for it)"
        if t.pin_s
        else ""
    )
    w = workers(case.window.snapshot, case.window.loader_name)
    if not t.handles or not t.receive_s or not t.batches:
        why = "the run did not count the tensors a batch holds" if t.receive_s else "it is all pinning"
        return Proposal(said=f"{FEWER_TENSORS}; no gain is stated: {why}{pin}")
    if t.per_batch < 2:
        return Proposal(
            said=f"send fewer bytes per batch: each batch already comes as {t.tensors} (its "
            f"{format_seconds(t.receive_s / t.batches)} a batch is that handle's: the worker that sent it "
            "passes its descriptor), so fewer tensors cannot help: a smaller dtype (uint8 images, converted "
            "on the device), nothing the step does not use; no gain is stated: the run does not measure "
            f"what a byte costs{pin}"
        )
    if w is None:
        return Proposal(
            said=f"{FEWER_TENSORS}; no gain is stated: the workers' time per batch was not recorded, so "
            f"whether they would keep up is unknown{pin}"
        )
    n, wall = t.batches, case.window.account.wall_s
    period = wall / n
    pace = (w.batch_s + 2 * IPC_S) / w.count * (1 + CONTENTION_MARGIN)  # the workers', pessimistic
    low = n * (period - max(period - (t.handle_s - t.kept_s) / n, pace))
    high = n * (period - max(period - t.receive_s / n, w.batch_s / w.count))
    gain = (max(0.0, low / wall), max(0.0, high / wall))
    said = (
        f"send fewer, larger tensors: each batch came as {t.tensors}, each rebuilt from its own "
        f"shared-memory handle ({format_seconds(t.handle_s / n)} of the {format_seconds(t.receive_s / n)} "
        "a batch took to rebuild); stack them into one tensor a batch in the dataset or the collate_fn, "
        "and send nothing the step does not use"
    )
    if gain[0] < NOISE:
        return Proposal(
            said=f"{said}; no gain is stated: past each batch's slowest handle and the workers' pace "
            f"({format_seconds(w.batch_s)} a batch in {plural(w.count, 'worker')}), it would save about as "
            f"much as the noise{pin}"
        )
    bound = (
        f"; its low end keeps each batch's slowest handle ({format_seconds(t.kept_s / n)}) and the "
        f"workers' pace ({format_seconds(w.batch_s)} a batch in {plural(w.count, 'worker')})"
    )
    return Proposal(
        {},
        gain,
        _with_gain(case, said, gain) + bound + f"; a smaller dtype makes each handle cheaper too{pin}",
    )


@dataclass(frozen=True)
class SlowWorker:
    """One DataLoader worker slower than the others, and the loop's pace it sets (seconds a batch).

    Batches are handed to the workers in turn (``in_order``, the default), so in steady state the loop
    turns once per ``max(own, slow / count, others / count)``: its own time a batch (the loop's body
    and its own part of each wait), or the pace the slowest worker makes its one batch in ``count``.
    """

    worker: int
    count: int  # the workers making batches
    slow_s: float  # its batch
    others_s: float  # the others' (their median)
    busy: float | None  # its batches' CPU time over their wall time (None: not recorded)
    queued: float | None  # their time queued for a core (ready to run), over their wall (None: not recorded)
    steps: int
    period_s: float  # the loop's time a batch, as measured (the epoch's wall over its steps)
    blocked_s: float  # of it, blocked until a worker's batch came

    @property
    def own_s(self) -> float:
        """The loop's time a batch beside the workers: its body and what its waits did in this process."""
        return max(0.0, self.period_s - self.blocked_s)

    @property
    def saved_s(self) -> float:
        """What a batch would take less with the slow worker as fast as the others: the pace it sets
        over the pace they would (their own or the loop's), never more than the loop was blocked."""
        others = max(self.own_s, self.others_s / self.count)
        return min(self.blocked_s, max(0.0, self.slow_s / self.count - others))

    @property
    def computes(self) -> bool:
        """Its batches are made by computing: CPU at least half the time they were not queued for a
        core (a worker computing on a crowded machine queues, a waiting one does not); unmeasured
        counts as computing (the safe side)."""
        return self.busy is None or self.busy >= COMPUTES * (1 - (self.queued or 0.0))


def slow_one(case: Case) -> SlowWorker | None:
    """The slow worker of the stage's loader, if one is 1.5x the others' median."""
    a = case.window.account
    loader = case.window.loader_name
    snap = case.window.snapshot
    steps = case.steps // max(1, len(case.window.ranks))
    if fetch_series(loader) not in snap or not steps or a.wall_s <= 0:
        return None
    wall = {w: s for w, s in snap.by_worker(fetch_series(loader)).items() if w is not None and s.count}
    if len(wall) < 2:
        return None
    means = {w: s.mean_s for w, s in wall.items()}
    slow = max(means, key=lambda w: means[w])
    others = statistics.median(m for w, m in means.items() if w != slow)
    if others <= 0 or means[slow] < SLOW_WORKER_RATIO * others:
        return None
    cpu = snap.by_worker(fetch_cpu_series(loader)).get(slow) if fetch_cpu_series(loader) in snap else None
    busy = cpu.total_s / wall[slow].total_s if cpu is not None and wall[slow].total_s > 0 else None
    queue = (
        snap.by_worker(fetch_queued_series(loader)).get(slow) if fetch_queued_series(loader) in snap else None
    )
    queued = queue.total_s / wall[slow].total_s if queue is not None and wall[slow].total_s > 0 else None
    setting = snap.gauges.get(setting_gauge(loader, "num_workers"))
    count = max(len(wall), int(setting.last) if setting is not None else 0)
    parts = a.subjects.get("wait_parts", {})
    blocked = parts.get(WORKER_WAIT, 0.0) if parts else a.seconds("data_wait")
    return SlowWorker(
        slow, count, means[slow], others, busy, queued, steps, a.wall_s / steps, blocked / steps
    )


def slow_worker(case: Case, minimum: float) -> Outcome:
    a = case.window.account
    if a.fraction("data_wait") < minimum:
        return None
    s = slow_one(case)
    if s is None:
        return None
    share = s.steps * s.saved_s / a.wall_s
    if share < minimum:
        return None
    queued = (
        f" and {s.queued:.0%} queued for a core" if s.queued is not None and s.queued >= QUEUED_SAID else ""
    )
    doing = (
        ""
        if s.busy is None
        else f"; its batches are {s.busy:.0%} CPU{queued}: "
        + (
            "computing (heavier samples, a costlier transform)"
            if s.computes
            else "waiting (a slow disk, a remote file, a lock)"
        )
    )
    message = (
        f"DataLoader worker {s.worker} of {display_name(case.window.loader_name)} is the slow one: its "
        f"batches take {format_seconds(s.slow_s)} against {format_seconds(s.others_s)} for the others "
        f"({s.slow_s / s.others_s:.1f}x){doing}; handed one batch in {s.count}, it sets the loop's pace "
        f"({format_seconds(s.period_s)} a batch against {format_seconds(s.own_s)} of its own) and adds about "
        f"{share:.0%} of the epoch to its wait"
    )
    evidence = {
        "worker": float(s.worker),
        "worker_batch_s": s.slow_s,
        "others_batch_s": s.others_s,
        "workers": float(s.count),
        "loop_own_s": s.own_s,
    }
    if s.busy is not None:
        evidence["worker_cpu_fraction"] = s.busy
    if s.queued is not None:
        evidence["worker_queued_fraction"] = s.queued
    return case.verdict(share, message, look_at(s), subject=f"worker {s.worker}", evidence=evidence)


def cpu_said(s: SlowWorker) -> str:
    """`` (41% CPU, 60% queued for a core)``; empty where the CPU was not recorded."""
    if s.busy is None:
        return ""
    queued = f", {s.queued:.0%} queued for a core" if s.queued is not None and s.queued >= QUEUED_SAID else ""
    return f" ({s.busy:.0%} CPU{queued})"


def look_at(s: SlowWorker) -> str:
    """Where to look for what makes the worker slow."""
    if s.busy is not None and not s.computes:
        return (
            f"look at what worker {s.worker} reads: the files or shard its indices map to (with an "
            "IterableDataset, the shard worker_init_fn gives it), a disk or a network mount only it touches"
        )
    return (
        f"look at what worker {s.worker} computes: the samples its indices map to (longer ones, larger "
        "images: spread them across the workers), a transform only they take"
    )


def worker_advice(case: Case, v: Verdict) -> Proposal:
    """SLOW_WORKER's action: more workers where its batches wait (each then makes one batch in more,
    and a waiting worker needs little of a core), with the count that keeps up with the loop and its
    gain; where they compute, the cores decide: each added worker computing needs a whole core the
    model and the workers running leave free (``workers._model``'s rule), and none is free where the
    slow worker itself queued for one (``CROWDED``). With none left no count is proposed: the change
    is then the batches' own, in code, and no gain is stated. A larger ``prefetch_factor`` is never
    proposed: it buffers batches, and the slow worker still makes one batch in ``count``.

    The share of a computing worker (the pace it sets) is the least its cheaper batches save: it
    also slows the loop's own work, sharing the cores with it and handing its batches over late
    (their descriptors come from a busy process). Made as cheap as the others', the planted worker
    (tests/torch/test_planted_verdicts.py) saved 1.5-2 points more than its share on a quiet 2-core
    machine, and 4-28 points more with other jobs on the cores (a batch's receiving 0.2-0.5 ms
    slower, its step 0.2-0.4 ms), which no measurement here attributes to it: the words say "or
    more"."""
    s = slow_one(case)
    f = facts(case, case.window.account.seconds("data_wait"))
    if s is None or f is None:
        return Proposal(said=v.action)
    snap, loader = case.window.snapshot, case.window.loader_name
    # the cores the workers want: the time they ran or were ready to run (queued for a core)
    cpu = sum(snap[x(loader)].total_s for x in (fetch_cpu_series, fetch_queued_series) if x(loader) in snap)
    cpu /= f.wall_s
    crowded = s.queued is not None and s.queued >= CROWDED
    if s.computes:
        free = 0.0 if crowded else f.cores - f.model_cores - cpu
        cap = s.count + max(0, math.floor(free + 1e-9))
    else:
        cap = max(2 * f.cores, math.floor(f.free_cores / max(s.busy or 0.0, WAITING_CORE) + 1e-9))
    memory = f.memory_workers
    if memory is not None:
        cap = min(cap, memory)
    needed = math.ceil(s.slow_s / s.own_s - 1e-9) if s.own_s > 0 else cap
    k = min(needed, cap)
    kind = f"worker {s.worker}'s batches {'compute' if s.computes else 'wait'}{cpu_said(s)}"
    if k <= s.count:
        if memory is not None and memory <= s.count and memory < needed:
            limit = f"memory, not the worker count, is the limit ({memory_words(f)})"
        elif crowded:
            limit = (
                "the time they queued says the machine's cores are taken (by the model, the workers and "
                "whatever else runs there): another worker computing would queue too: the cores, not the "
                "worker count, are the limit"
            )
        elif s.computes:
            limit = (
                f"the model keeps {f.model_cores:.1f} of {plural(f.cores, 'core')} busy and the workers "
                f"want {cpu:.1f} (running or ready to): less than a core is free, and a worker computing "
                "needs one of its own: the cores, not the worker count, are the limit"
            )
        else:
            limit = (
                f"the {plural(s.count, 'worker')} running already take the cores the model leaves "
                f"({f.free_cores:.1f} of {plural(f.cores, 'core')}): the cores, not the worker count, are "
                "the limit"
            )
        more = (
            ", or more: a worker computing slows the loop's own work too, sharing the cores with it and "
            "handing its batches over late"
            if s.computes
            else ""
        )
        return Proposal(
            said=f"no worker count is proposed: {kind}, and {limit}; {look_at(s)}, and make those batches "
            f"cheaper: as fast as the others' they would save about the {v.share:.0%} of the epoch this "
            f"verdict claims{more}; no gain is stated: the change is code, and how much cheaper is yours "
            "to make"
        )
    if f.unstable:
        found = f"{plural(k, 'worker')} would keep up"
        return Proposal(said=f"{unstable(f, found)}; {look_at(s)}")
    cores = ((f.loop_cpu_s if f.loop_cpu_s is not None else s.own_s) + (f.batch_cpu_s or 0.0)) / f.cores
    fast = max(s.own_s, s.slow_s / k, s.others_s / k, cores)
    slow = max(s.own_s + IPC_S, (s.slow_s + 2 * IPC_S) / k, cores + 2 * IPC_S / f.cores) * (
        1 + CONTENTION_MARGIN
    )
    # each start of the loader: every worker begins its first batch at once, and the loop reaches
    # the slow one's (its index in the turn) after that many batches of its own time: the rest waits
    first = f.starts * max(0.0, s.slow_s - s.worker * s.own_s)
    high = (s.steps * (s.period_s - fast) - first) / f.wall_s
    low = (s.steps * (s.period_s - slow) - first) / f.wall_s
    change: dict[str, Any] = {"loader": loader, "num_workers": k}
    if not f.persistent:  # a pool started once: every epoch would otherwise start them all
        change["persistent_workers"] = True
        low -= START_S / f.wall_s
    if low < NOISE:
        return Proposal(said=f"{not_worth(f, k)}; {look_at(s)}")
    settings = ", ".join(f"{key}={value}" for key, value in change.items() if key != "loader")
    keeps = "keeps up with" if k >= needed else "comes closer to"
    said = (
        f"set {settings} on the {display_name(loader)} DataLoader: {kind}, so more workers hide it: with "
        f"{k} it makes one batch in {k}, and its {format_seconds(s.slow_s)} {keeps} "
        f"{format_seconds(s.own_s)} of loop time"
    )
    gain = (max(0.0, low), max(0.0, high))
    return Proposal(
        change,
        gain,
        f"{_with_gain(case, said, gain)}; a larger prefetch_factor would not: it buffers batches, and worker "
        f"{s.worker} would still make one in {s.count} at its own pace; {look_at(s)}",
    )


def _with_gain(case: Case, said: str, gain: tuple[float, float] | None) -> str:
    weight = case.stage_wall_s / case.run_wall_s if case.run_wall_s > 0 else 1.0
    return f"{said}; {gain_words(gain, weight)}" if gain is not None else said


RULES = (
    Rule("OPTIMIZER_STEP", ("step parts",), 0.15,
         "an optimizer step worth a sixth of the epoch is its own fix: faster models do not touch it",
         optimizer_step, claims="step"),
    Rule("SLOW_BACKWARD", ("step parts",), 0.30,
         "a third of the epoch in a backward 2.5x its forward holds work the forward does not",
         slow_backward, claims="step"),
    Rule("SLOW_SAMPLER", ("wait parts",), 0.05,
         "a sampler runs in the loop's own process: a twentieth of the epoch there no worker can hide",
         slow_sampler, claims="data_wait", propose=sampler_advice),
    Rule("BATCH_TRANSFER", ("wait parts",), 0.05,
         "moving a batch should cost far less than making it: a twentieth of the epoch is worth shrinking it",
         batch_transfer, claims="data_wait", propose=transfer_advice),
    Rule("SLOW_WORKER", ("worker batches",), 0.05,
         "one worker 1.5x slower than the others is that worker's data, not the loader's count",
         slow_worker, claims="data_wait", propose=worker_advice),
)  # fmt: skip
