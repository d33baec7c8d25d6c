"""COMMUNICATION_BOUND: the ranks held by their collectives, where in the step and in which one.

Under FSDP2 every layer's parameters are all-gathered before its forward (and again before its
backward, where they were resharded) and its gradients reduce-scattered after its backward; DDP
all-reduces the gradients in buckets during backward. What costs the job is the *exposed* part:
the time a rank was held in a collective, not the time the collective ran beside compute
(``perfkit.torch.time_collectives``, the account's overlay ``collective_wait``; DDP's
``sync_wait``). Where one slow rank made the others wait, that wait is the straggler's
(STRAGGLER names the rank and the part of its step): only the rest is communication's own, and
what helps follows from where it is exposed (``perfkit.stages.communication``).
"""

from __future__ import annotations

from ..._rule import Outcome
from ..._units import format_bytes
from ...names import BACKWARD, FORWARD, stage_label
from ...stages import Communication, communication, straggler_parts
from .._case import Case
from ._rule import Rule

_ACTIONS = {
    ("all_gather", FORWARD): (
        "the next layers' parameters are gathered while forward waits: keep them gathered where memory "
        "allows (fully_shard(..., reshard_after_forward=False) on the last blocks or the root), prefetch "
        "further ahead (module.set_modules_to_forward_prefetch), shard fewer, larger units, and gather "
        "bf16 parameters (MixedPrecisionPolicy(param_dtype=torch.bfloat16)) to halve the bytes"
    ),
    ("all_gather", BACKWARD): (
        "backward gathers again the parameters resharded after forward: reshard_after_forward=False "
        "(memory allowing) skips it; module.set_modules_to_backward_prefetch gathers them earlier"
    ),
    ("reduce_scatter", BACKWARD): (
        "the gradients' reduce-scatter is exposed: reduce in bf16 (MixedPrecisionPolicy(reduce_dtype="
        "torch.bfloat16)), sync gradients once per accumulation cycle (set_requires_gradient_sync(False) "
        "on the micro-batches before the last), shard fewer, larger units"
    ),
    ("all_reduce", BACKWARD): (
        "the gradients' all-reduce is exposed: sync once per accumulation cycle (DDP's no_sync() on the "
        "micro-batches before the last), larger buckets (bucket_cap_mb), gradient_as_bucket_view=True, "
        "a bf16 compression hook (ddp_comm_hooks.default_hooks.bf16_compress_hook)"
    ),
}
_GENERAL = (
    "overlap communication with compute and send fewer, larger messages; if the bytes per step are "
    "what the model needs, the interconnect is the limit (NCCL_DEBUG=INFO says which transport runs)"
)


def _own_wait(case: Case, comm: Communication) -> float:
    """The ranks' mean wait less what a slow rank's extra compute explains (the others wait that
    long for it: STRAGGLER's seconds)."""
    slow = straggler_parts(case.window)
    if slow is None:
        return comm.wait_s
    n = len(case.window.ranks)
    explained = sum(max(0.0, s) for s in slow.excess_s.values()) * (n - 1) / n
    return max(0.0, comm.wait_s - explained)


def communication_bound(case: Case, minimum: float) -> Outcome:
    comm = communication(case.window)
    if comm is None or comm.wall_s <= 0:
        return None
    share = _own_wait(case, comm) / comm.wall_s
    if share < minimum:
        return None
    top = comm.top or "collectives"
    part = max(comm.by_part, key=comm.by_part.__getitem__) if comm.by_part else None
    label = stage_label(case.stage)
    message = f"the ranks are held in collectives {share:.0%} of the {label} epoch"
    if comm.share > share + 0.005:
        message += f" ({comm.share:.0%} in all, the rest waiting for a slow rank)"
    message += f": {top} {comm.by_collective.get(top, 0.0) / comm.wall_s:.0%}"
    if part is not None:
        message += f"; the waits mostly in {part}"
    per_step = comm.bytes_per_step.get(top)
    calls = comm.calls_per_step.get(top)
    if per_step and calls:
        message += f" ({format_bytes(per_step)} a step in {calls:.0f} call{'' if round(calls) == 1 else 's'})"
    action = _ACTIONS.get((top, part or ""), _GENERAL)
    evidence = {"wait_fraction": comm.share, "own_wait_fraction": share}
    evidence |= {f"{k}_s": v for k, v in comm.by_collective.items()}
    return case.verdict(share, message, action, subject=top, evidence=evidence)


RULES = (
    Rule("COMMUNICATION_BOUND", ("collectives",), 0.10,
         "a tenth of the epoch with every rank held in collectives is communication the step does not "
         "hide", communication_bound, claims="step", generality=1),
)  # fmt: skip
