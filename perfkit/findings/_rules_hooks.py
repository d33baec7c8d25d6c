"""The rules that name what runs outside the step: the model's own hooks, the loggers, checkpoint
saving, and what no timer covers (``other``).

Each reads one part or subject of the account (``perfkit.stages.Account``); ``_rules.RULES`` lists
them beside the others. A subject with nothing in it (no logger, no hook of the model's, no
checkpoint callback was timed) is nothing to judge.
"""

from __future__ import annotations

from .._display import display_name
from .._rule import Outcome
from .._units import format_seconds
from ..names import CHECKPOINT, LOGGERS, MODULE_HOOKS, stage_label
from ..stages import RESIDUAL_ZONES
from ._case import Case

LOGGER_MIN = 0.05


def slow_logger(case: Case) -> Outcome:
    methods = case.window.account.subjects.get(LOGGERS, {})
    by_logger: dict[str, dict[str, float]] = {}
    for owner, seconds in methods.items():  # CLASS.METHOD
        logger, _, method = owner.rpartition(".")
        by_logger.setdefault(logger or owner, {})[method] = seconds
    if not by_logger:
        return None
    logger, spent = max(by_logger.items(), key=lambda kv: sum(kv[1].values()))
    total = sum(spent.values())
    share = total / case.wall_s if case.wall_s > 0 else 0.0
    if share < LOGGER_MIN or total < RESIDUAL_STEP_S * max(1, case.steps):
        return None  # under what a framework's own loop costs a step: a tiny epoch's fixed cost
    method, seconds = max(spent.items(), key=lambda kv: kv[1])
    name = display_name(logger)
    message = (
        f"logger {name} takes {share:.0%} of the {stage_label(case.stage)} epoch "
        f"({format_seconds(total)}), {seconds / total:.0%} of it in {display_name(method)}"
    )
    action = (
        f"{name}.{display_name(method)} blocks the loop: log less often (Trainer(log_every_n_steps=N)) "
        "or make the call return at once (send to the tracker from a background thread, an offline mode)"
    )
    evidence = {"logger_s": total, "method_s": seconds}
    return case.verdict(share, message, action, subject=f"{logger}.{method}", evidence=evidence)


HOOK_MIN = 0.10


def module_hook(case: Case) -> Outcome:
    hooks = case.window.account.subjects.get(MODULE_HOOKS)
    if not hooks:  # a script, or a model that overrides no hook: nothing to judge
        return None
    hook, seconds = max(hooks.items(), key=lambda kv: kv[1])
    share = seconds / case.wall_s if case.wall_s > 0 else 0.0
    if share < HOOK_MIN:
        return None
    message = (
        f"the model's hook {display_name(hook)} takes {share:.0%} of the {stage_label(case.stage)} epoch "
        f"({format_seconds(seconds)}), outside the step"
    )
    action = (
        f"make {display_name(hook)} cheaper or do its work less often; time its parts with perfkit.section"
    )
    return case.verdict(share, message, action, subject=hook, evidence={"hook_s": seconds})


CHECKPOINT_MIN = 0.10


def checkpoint(case: Case) -> Outcome:
    saving = case.window.account.subjects.get(CHECKPOINT)
    if not saving:
        return None
    owner, seconds = max(saving.items(), key=lambda kv: kv[1])
    share = seconds / case.wall_s if case.wall_s > 0 else 0.0
    if share < CHECKPOINT_MIN:
        return None
    message = (
        f"saving checkpoints ({display_name(owner)}) takes {share:.0%} of the {stage_label(case.stage)} "
        f"epoch ({format_seconds(seconds)})"
    )
    action = (
        "save less often (every_n_epochs=N: a crash then loses up to N epochs), keep fewer (save_top_k), "
        "or write in the background (Trainer(plugins=[AsyncCheckpointIO()]): a copy of the state in memory "
        "while it writes)"
    )
    return case.verdict(share, message, action, subject=owner, evidence={"checkpoint_s": seconds})


RESIDUAL_MIN = 0.10
RESIDUAL_STEP_S = 0.001
"""What a framework's own loop may cost per step unnamed (Lightning's measured about 0.2-0.3 ms a step on
a tiny model here): a short epoch's few milliseconds of loop are no finding, whatever their share."""

_ZONE_WORDS = {
    "before_first_step": "before the first step",
    "between_steps": "between steps",
    "after_last_step": "after the last step (the epoch's end)",
}


def residual(case: Case) -> Outcome:
    a = case.window.account
    zones = a.subjects.get("other", {})
    share = a.fraction("other")
    if share < RESIDUAL_MIN or a.seconds("other") < RESIDUAL_STEP_S * max(1, case.steps):
        return None
    label = stage_label(case.stage)
    message = (
        f"{share:.0%} of the {label} epoch ({format_seconds(a.seconds('other'))}) is outside every timed part"
    )
    ranked = sorted(((zones.get(z, 0.0), z) for z in RESIDUAL_ZONES), reverse=True)
    where = [f"{format_seconds(s)} {_ZONE_WORDS[z]}" for s, z in ranked if s > 0]
    if where:
        message += ": " + ", ".join(where)
    steps = case.steps
    if zones.get("between_steps") and steps > 1:
        message += f" ({format_seconds(zones['between_steps'] / (steps - 1))} between each two)"
    top = ranked[0][1] if ranked[0][0] > 0 else "between_steps"
    evidence = {f"{z}_s": zones.get(z, 0.0) for z in RESIDUAL_ZONES} | {"other_s": a.seconds("other")}
    return case.verdict(share, message, _find_it(case, top), subject=top, evidence=evidence)


def _find_it(case: Case, zone: str) -> str:
    """How to see what the residual is: a profiler window on this epoch, exactly."""
    stage, epoch, steps = case.stage, case.window.epoch, case.steps
    framework = any(case.window.account.subjects.get(k) for k in ("callbacks", CHECKPOINT, MODULE_HOOKS))
    if zone == "after_last_step" and steps:
        # a window still recording when the stage ends closes there, so it holds the epoch's end
        window = f"epochs=[{epoch}], stages=[{stage!r}], skip_first={max(0, steps - 3)}, warmup_steps=0"
        lightning = (
            f"ProfilerCallback(profile_epochs=[{epoch}], stages=[{stage!r}], "
            f"skip_first={max(0, steps - 3)}, warmup_steps=0)"
        )
    else:
        window = f"epochs=[{epoch}], stages=[{stage!r}]"
        lightning = f"ProfilerCallback(profile_epochs=[{epoch}], stages=[{stage!r}])"
    if framework:
        return f"profile that epoch to see it: add {lightning} to the Trainer's callbacks"
    return (
        f"time the code of the window outside the loop with perfkit.section, or profile that epoch: "
        f"perfkit.window({stage!r}, epoch={epoch}, listeners=[perfkit.torch.ProfilerWindows({window})])"
    )
