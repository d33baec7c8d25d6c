"""The rules that read one level below the account: the step's parts and where a wait for data went.

The step splits into forward, backward, the optimizer step, zero_grad and the rest
(``Account.subjects["step"]``); a wait for a batch into what the main process did meanwhile -- the
sampler, rebuilding a worker's batch, pinning -- and the time blocked on a worker
(``subjects["wait_parts"]``), and each worker's batches have their own wall and CPU time. Each rule
names one thing, so the partition serves it before the general verdict on the part it claims
(OPTIMIZER_STEP and SLOW_BACKWARD before COMPUTE_BOUND; SLOW_SAMPLER, BATCH_TRANSFER and
SLOW_WORKER before INPUT_BOUND), and nothing is claimed twice. A gain is stated only where the
part's own time bounds it (a sampler made free saves the time it ran in the main process's wait);
where the change is code (an optimizer's implementation), the verdict says what to change and how
much of the epoch is at stake, not a guess of how much it will save.
"""

from __future__ import annotations

import statistics

from ..._rule import Outcome
from ..._units import format_seconds
from ...names import (
    BACKWARD,
    COLLECTIVE_WAIT,
    FORWARD,
    STEP_PART,
    SYNC_WAIT,
    display_name,
    fetch_cpu_series,
    fetch_series,
    stage_label,
    step_part_series,
)
from ...stages import Account
from .._case import Case
from ._rule import Rule

BACKWARD_OVER_FORWARD = 2.5
"""A backward pass costs about twice its forward (two matmuls per one, per layer); past this it holds
something the forward does not (a custom Function, a gradient hook, recomputed activations)."""
SLOW_WORKER_RATIO = 1.5
"""One worker's batches this much slower than the others' is that worker's, not the loader's."""


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


def batch_transfer(case: Case, minimum: float) -> Outcome:
    a = case.window.account
    where = a.subjects.get("wait_parts", {})
    receive, pin = where.get("receive", 0.0), where.get("pin", 0.0)
    seconds = receive + pin
    share = seconds / a.wall_s if a.wall_s > 0 else 0.0
    if share < minimum:
        return None
    batches = max(1, case.steps)
    parts = [f"rebuilding the workers' batches {format_seconds(receive)}"] if receive else []
    parts += [f"pinning them {format_seconds(pin)}"] if pin else []
    message = (
        f"moving batches into the main process takes {share:.0%} of the {stage_label(case.stage)} epoch "
        f"({format_seconds(seconds / batches)} a batch: {', '.join(parts)})"
    )
    action = (
        "send less per batch: fewer, larger tensors (one stacked tensor rather than a list or dict of many "
        "small ones, each of which costs its own handle), a smaller dtype (uint8 images, converted on the "
        "device), nothing the step does not use"
    )
    if pin:
        action += "; pinning in the loop's thread: with num_workers > 0 torch pins in a thread of its own"
    evidence = {"receive_s": receive, "pin_s": pin, "transfer_fraction": share}
    return case.verdict(share, message, action, subject="transfer", evidence=evidence)


def slow_worker(case: Case, minimum: float) -> Outcome:
    a = case.window.account
    if a.fraction("data_wait") < minimum:
        return None
    loader = case.window.loader_name
    snap = case.window.snapshot
    if fetch_series(loader) not in snap:
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
    doing = (
        ""
        if busy is None
        else f"; its batches are {busy:.0%} CPU: "
        + ("waiting (a slow disk, a remote file, a lock)" if busy < 0.5 else "computing (heavier samples)")
    )
    # the part of the wait the slow worker adds: as fast as the others, its batches would come at
    # their pace (batches are handed out in turn, so the loop waits for the slowest)
    share = a.fraction("data_wait") * (1 - others / means[slow])
    if share < minimum:
        return None
    message = (
        f"DataLoader worker {slow} of {display_name(loader)} is the slow one: its batches take "
        f"{format_seconds(means[slow])} against {format_seconds(others)} for the others "
        f"({means[slow] / others:.1f}x){doing}; it adds about {share:.0%} of the epoch to the loop's wait"
    )
    action = (
        f"look at what worker {slow} reads: the files or shard its indices map to (with an IterableDataset, "
        "the shard worker_init_fn gives it), a disk or a network mount only it touches"
    )
    evidence = {"worker": float(slow), "worker_batch_s": means[slow], "others_batch_s": others}
    if busy is not None:
        evidence["worker_cpu_fraction"] = busy
    return case.verdict(share, message, action, subject=f"worker {slow}", evidence=evidence)


RULES = (
    Rule("OPTIMIZER_STEP", ("step parts",), 0.15,
         "an optimizer step worth a sixth of the epoch is its own fix: faster models do not touch it",
         optimizer_step, claims="step"),
    Rule("SLOW_BACKWARD", ("step parts",), 0.30,
         "a third of the epoch in a backward 2.5x its forward holds work the forward does not",
         slow_backward, claims="step"),
    Rule("SLOW_SAMPLER", ("wait parts",), 0.05,
         "a sampler runs in the loop's own process: a twentieth of the epoch there no worker can hide",
         slow_sampler, claims="data_wait"),
    Rule("BATCH_TRANSFER", ("wait parts",), 0.05,
         "moving a batch should cost far less than making it: a twentieth of the epoch is worth shrinking it",
         batch_transfer, claims="data_wait"),
    Rule("SLOW_WORKER", ("worker batches",), 0.05,
         "one worker 1.5x slower than the others is that worker's data, not the loader's count",
         slow_worker, claims="data_wait"),
)  # fmt: skip
