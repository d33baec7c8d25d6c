"""The rules that read the GPU's own account: where the host waited on the device, copies to it,
a device left idle, and what it achieved against its peak.

On a GPU the host's clock around a step is not the device's time: the host queues work and runs
ahead until something synchronizes. So a step can be the host blocked in a synchronizing call
(SYNC_STALL: ``loss.item()`` every step, timed at its call site by ``perfkit.torch.watch_syncs``),
the host copying a batch from pageable memory (H2D_COPY, from ``perfkit.torch.time_copy``), or the
host launching kernels slower than the device runs them (HOST_BOUND: the step keeps the host busy
while NVML says the GPU mostly idles). Each names one thing and claims the step's seconds, so it is
served before COMPUTE_BOUND. GPU_IDLE is a symptom: the device idle through much of the epoch, said
beside the cause that claims the part explaining it (the data wait, or the step). MFU (the step's
FLOPs against the device's dense peak, where both were known) is context on COMPUTE_BOUND.
"""

from __future__ import annotations

from ..._device_facts import copy_advice, copy_stats, gpu_busy, stall_sites
from ..._mfu import mfu
from ..._rule import Outcome
from ..._units import format_bytes, format_seconds
from ...names import FLOPS_PER_STEP, PEAK_FLOPS, stage_label, step_series
from .._case import Case
from ._rule import Rule

HOST_BUSY = 0.5
"""A step holding half the epoch is what the host spends its time on: where the GPU idles through
it, the host is the limit."""


def mfu_line(case: Case) -> str | None:
    """The window's MFU in words, where its FLOPs per step and its device's peak were recorded."""
    snap = case.window.snapshot
    flops, peak = snap.gauges.get(FLOPS_PER_STEP), snap.gauges.get(PEAK_FLOPS)
    step = snap.get(step_series(case.stage))
    if flops is None or peak is None or step is None or step.total_s <= 0:
        return None
    return mfu(flops.last, steps=step.count, seconds=step.total_s, peak=peak.last / 1e12).line


def sync_cost(case: Case) -> tuple[float, float]:
    """What the window's timed synchronizations cost, as shares of the epoch: (saved, blocked).

    ``blocked`` is the host's time in them (a pageable copy's wait left to H2D_COPY). It is not the
    cost: while the host waits the GPU runs what was queued. The cost is the host's other work in
    the step, done while the GPU had nothing queued; without the sync it overlaps the GPU's. A step
    of G seconds on the GPU and H of the host's own goes from G + H to max(G, H): it saves
    min(G, H), here min(blocked, step - blocked), and never more than the GPU's idle share where
    NVML read it. A loop that queues its epoch and synchronizes once at the end (blocked nearly all
    of it, busy throughout) saves nothing.
    """
    sites = [s for s in stall_sites(case.window.snapshot) if s.timed]
    wall = case.window.account.wall_s
    copies = copy_stats(case.window.snapshot)
    total = max(0.0, sum(s.total_s for s in sites) - (copies.host_s if copies is not None else 0.0))
    blocked = total / wall if wall > 0 else 0.0
    saved = min(blocked, max(0.0, case.fraction("step") - blocked))
    busy = gpu_busy(case.window.snapshot)
    if busy is not None:
        saved = min(saved, 1 - busy)
    return saved, blocked


def sync_stall(case: Case, minimum: float) -> Outcome:
    share, blocked = sync_cost(case)
    if share < minimum:
        return None
    sites = [s for s in stall_sites(case.window.snapshot) if s.timed]
    top = sites[0]
    where = f"{top.site} ({top.count} calls, {format_seconds(top.mean_s)} each)"
    more = f" and {len(sites) - 1} other site{'s' if len(sites) > 2 else ''}" if len(sites) > 1 else ""
    message = (
        f"the host waits on the GPU {blocked:.0%} of the {stage_label(case.stage)} epoch in synchronizing "
        f"calls: {where}{more}; with nothing queued after each, the GPU idles while the host does the rest "
        f"of the step: overlapping the two would save up to {share:.0%} of the epoch"
    )
    action = (
        f"stop synchronizing every step at {top.site}: keep the loss and metrics on the device and read "
        "them every N steps (loss.detach(), then .item() at logging time; Lightning's self.log does), "
        "no .cpu(), .item(), .tolist(), nonzero() or printing of a tensor inside the loop"
    )
    wall = case.window.account.wall_s
    evidence = {"stall_s": blocked * wall, "stall_fraction": blocked, "calls": float(top.count)}
    return case.verdict(share, message, action, subject=top.site, evidence=evidence)


def h2d_copy(case: Case, minimum: float) -> Outcome:
    found = copy_stats(case.window.snapshot)
    wall = case.window.account.wall_s
    if found is None or wall <= 0:
        return None
    share = found.host_s / wall
    if share < minimum:
        return None
    per = found.bytes / found.count if found.count else 0.0
    pinned = f"{found.pinned_fraction:.0%} pinned"
    message = (
        f"copying batches to the GPU holds the host {share:.0%} of the {stage_label(case.stage)} epoch "
        f"({found.count} copies, {format_bytes(per)} each, {pinned})"
    )
    advice = copy_advice(found)
    if advice is None:
        return case.verdict(
            share, message, "send less per batch (a smaller dtype, converted on the device)", subject="h2d"
        )
    gain = (advice.gain_s[0] / wall, advice.gain_s[1] / wall)
    return case.verdict(
        share, message, advice.message, subject="h2d", change=dict(advice.change), gain=gain,
        evidence={"copy_s": found.host_s, "copy_bytes": found.bytes},
    )  # fmt: skip


def host_bound(case: Case, minimum: float) -> Outcome:
    busy = gpu_busy(case.window.snapshot)
    step = case.fraction("step")
    if busy is None or step < HOST_BUSY:
        return None
    # the step's time the GPU was not busy in, less what the syncs and copies explain (theirs)
    copies = copy_stats(case.window.snapshot)
    copied = (
        copies.host_s / case.window.account.wall_s
        if copies is not None and case.window.account.wall_s > 0
        else 0.0
    )
    share = step - busy - sync_cost(case)[0] - copied
    if share < minimum:
        return None
    message = (
        f"the step keeps the host busy {step:.0%} of the {stage_label(case.stage)} epoch while the GPU is "
        f"busy {busy:.0%}: the host's own work sets the step's time (Python, launching many small kernels), "
        "not the GPU"
    )
    action = (
        "launch fewer, larger kernels: CUDA graphs (torch.compile(mode='reduce-overhead')), torch.compile, "
        "a larger batch, fused optimizers (fused=True); a torch.profiler window shows the host's own ops"
    )
    evidence = {"gpu_busy_fraction": busy, "step_fraction": step}
    return case.verdict(share, message, action, subject="launch", evidence=evidence)


def gpu_idle(case: Case, minimum: float) -> Outcome:
    busy = gpu_busy(case.window.snapshot)
    if busy is None or 1 - busy < minimum:
        return None
    wait = case.fraction("data_wait")
    part = "data wait" if wait >= case.fraction("step") - busy else "step"
    message = f"the GPU is idle {1 - busy:.0%} of the {stage_label(case.stage)} epoch"
    action = "the verdict on the " + part + " says why"
    return case.verdict(1 - busy, message, action, subject=part, evidence={"gpu_busy_fraction": busy})


RULES = (
    Rule("SYNC_STALL", ("sync stalls",), 0.05,
         "a twentieth of the epoch with the host blocked on the device is a pipeline the loop keeps "
         "draining", sync_stall, claims="step"),
    Rule("H2D_COPY", ("host-to-device copies",), 0.05,
         "copies a pinned, non-blocking batch would overlap: a twentieth of the epoch is worth pinning",
         h2d_copy, claims="step"),
    Rule("HOST_BOUND", ("gpu utilisation", "step"), 0.20,
         "a fifth of the epoch in a step the GPU idles through is launch overhead, which faster kernels "
         "do not touch", host_bound, claims="step"),
    Rule("GPU_IDLE", ("gpu utilisation",), 0.50,
         "an accelerator idle half the epoch is the first thing an owner of one asks about", gpu_idle,
         generality=3, symptom=True),
)  # fmt: skip
