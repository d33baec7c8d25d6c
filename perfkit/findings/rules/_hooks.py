"""The rules that name what runs outside the step: other callbacks' hooks, checkpoint saving, the
model's own hooks, the loggers, and what no timer covers (``other``).

The first four are one shape, the largest subject of an account part (``TopSubject``): a subject
with nothing in it (no callback, no logger, no hook of the model's, no checkpoint callback was
timed) is nothing to judge.
"""

from __future__ import annotations

from ..._rule import Outcome
from ..._units import format_seconds
from ...names import CALLBACKS, CHECKPOINT, LOGGERS, MODULE_HOOKS, stage_label
from ...stages import RESIDUAL_ZONES
from .._case import Case
from ._rule import Rule
from ._top import TopSubject

LOOP_STEP_S = 0.001
"""What a framework's own loop may cost per step unnamed (Lightning's measured about 0.2-0.3 ms a step on
a tiny model here): a short epoch's few milliseconds of loop are no finding, whatever their share."""

_ZONE_WORDS = {
    "before_first_step": "before the first step",
    "between_steps": "between steps",
    "after_last_step": "after the last step (the epoch's end)",
}


def residual(case: Case, minimum: float) -> Outcome:
    a = case.window.account
    zones = a.subjects.get("other", {})
    share = a.fraction("other")
    if share < minimum or a.seconds("other") < LOOP_STEP_S * max(1, case.steps):
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
    framework = any(case.window.account.subjects.get(k) for k in (CALLBACKS, CHECKPOINT, MODULE_HOOKS))
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


RULES = (
    Rule("CALLBACK_OVERHEAD", ("callback hooks",), 0.05,
         "a callback is meant to watch training: a twentieth of the epoch is a tax",
         TopSubject(CALLBACKS, "callback {name} takes {share:.0%} of the {stage} epoch in its hooks",
                    "make {name}'s hooks cheaper or run them less often (every N steps, at epoch end)",
                    "hook_s"),
         claims="callbacks"),
    Rule("CHECKPOINT", ("checkpoint callback hooks",), 0.10,
         "saving is the price of resuming; past a tenth of the epoch it is saved too often or too much",
         TopSubject(CHECKPOINT,
                    "saving checkpoints ({name}) takes {share:.0%} of the {stage} epoch ({seconds})",
                    "save less often (every_n_epochs=N: a crash then loses up to N epochs), keep fewer "
                    "(save_top_k), or write in the background (Trainer(plugins=[AsyncCheckpointIO()]): a "
                    "copy of the state in memory while it writes)",
                    "checkpoint_s"),
         claims="callbacks"),
    Rule("MODULE_HOOK", ("model hooks",), 0.10,
         "the model's hook outside the step is user code: a tenth of the epoch is the first place to look",
         TopSubject(MODULE_HOOKS,
                    "the model's hook {name} takes {share:.0%} of the {stage} epoch ({seconds}), "
                    "outside the step",
                    "make {name} cheaper or do its work less often; time its parts with perfkit.section",
                    "hook_s"),
         claims="module_hooks"),
    Rule("SLOW_LOGGER", ("logger methods",), 0.05,
         "a logger is meant to watch training: a twentieth of the epoch is a tax",
         TopSubject(LOGGERS,
                    "logger {name} takes {share:.0%} of the {stage} epoch ({seconds}), {method_share:.0%} of "
                    "it in {method}",
                    "{name}.{method} blocks the loop: log less often (Trainer(log_every_n_steps=N)) or make "
                    "the call return at once (send to the tracker from a background thread, an offline mode)",
                    "logger_s", by_owner="method_s", floor_s_per_step=LOOP_STEP_S),
         claims="loggers"),
    Rule("RESIDUAL", ("other",), 0.10,
         "a tenth of the epoch that no timer covers is too big to leave unnamed", residual, claims="other",
         generality=4),
)  # fmt: skip
