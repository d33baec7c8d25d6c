"""The rules that name what runs outside the step (the model's hooks, the loggers, checkpoint saving)
and what no timer covers, on hand-built stage epochs (``test_rules``' fake clock, one-second walls);
and INPUT_BOUND naming the section that made the batches inside the wait."""

from __future__ import annotations

from collections.abc import Callable

import pytest

import perfkit
from perfkit.names import CHECKPOINT_HOOK, LOGGER, MODULE_HOOK, hook_series

from .test_rules import Epoch, case, epoch, fires, judged

__all__ = ["epoch"]  # the fixture, used by name


def logger(e: Epoch, method: str, *ms: float, name: str = "TrackerLogger") -> Epoch:
    return e.span(hook_series(e.stage, f"{name}.{method}", LOGGER), *ms)


# ---- SLOW_LOGGER ----------------------------------------------------------------------------------


def test_slow_logger_fires_on_the_costliest_logger_naming_its_method(epoch: Callable[[str], Epoch]) -> None:
    e = logger(epoch("train").steps(100, 100), "log_metrics", 150, 150)
    window = logger(logger(e, "save", 20), "log_metrics", 30, name="CSVLogger").window()
    v = fires("SLOW_LOGGER", case(window))
    assert v.share == pytest.approx(0.320)  # 300 ms of log_metrics and 20 ms of save, of 1 s
    assert v.subject == "TrackerLogger.log_metrics"
    assert "TrackerLogger" in v.message
    assert "94% of it in log_metrics" in v.message
    assert "log_every_n_steps" in v.action


def test_slow_logger_is_silent_below_a_twentieth_of_the_epoch(epoch: Callable[[str], Epoch]) -> None:
    window = logger(epoch("train").steps(100), "log_metrics", 49).window()
    assert judged("SLOW_LOGGER", case(window)) == []


def test_slow_logger_says_nothing_when_no_logger_was_timed(epoch: Callable[[str], Epoch]) -> None:
    window = epoch("train").steps(400).window()  # a script: no logger of a framework
    assert judged("SLOW_LOGGER", case(window)) == []


# ---- MODULE_HOOK ----------------------------------------------------------------------------------


def test_module_hook_fires_on_the_models_costliest_hook(epoch: Callable[[str], Epoch]) -> None:
    e = epoch("train").steps(100).span(hook_series("train", "on_train_batch_end", MODULE_HOOK), 60, 60)
    window = e.span(hook_series("train", "on_train_epoch_end", MODULE_HOOK), 50).window()
    v = fires("MODULE_HOOK", case(window))
    assert (v.share, v.subject) == (pytest.approx(0.120), "on_train_batch_end")
    assert "outside the step" in v.message


def test_module_hook_is_silent_below_a_tenth_of_the_epoch(epoch: Callable[[str], Epoch]) -> None:
    window = epoch("train").span(hook_series("train", "on_train_epoch_end", MODULE_HOOK), 99).window()
    assert judged("MODULE_HOOK", case(window)) == []


def test_module_hook_says_nothing_when_the_model_overrides_no_hook(epoch: Callable[[str], Epoch]) -> None:
    """A script, or a model with no hook of its own: nothing to judge, nothing missing."""
    window = epoch("train").steps(400).window()
    assert judged("MODULE_HOOK", case(window)) == []


# ---- CHECKPOINT -----------------------------------------------------------------------------------


def test_checkpoint_fires_on_saving_and_callback_overhead_does_not_claim_it_again(
    epoch: Callable[[str], Epoch],
) -> None:
    e = epoch("train").steps(100).span(hook_series("train", "ModelCheckpoint", CHECKPOINT_HOOK), 250)
    window = e.window()
    assert window.account.seconds("callbacks") == pytest.approx(0.250)  # saving is a callback's time
    v = fires("CHECKPOINT", case(window))
    assert (v.share, v.subject) == (pytest.approx(0.250), "ModelCheckpoint")
    assert "every_n_epochs" in v.action
    assert "save_top_k" in v.action
    assert "AsyncCheckpointIO" in v.action
    assert judged("CALLBACK_OVERHEAD", case(window)) == []  # the same seconds, never twice


def test_checkpoint_is_silent_below_a_tenth_of_the_epoch(epoch: Callable[[str], Epoch]) -> None:
    window = epoch("train").span(hook_series("train", "ModelCheckpoint", CHECKPOINT_HOOK), 99).window()
    assert judged("CHECKPOINT", case(window)) == []


def test_checkpoint_says_nothing_without_a_checkpoint_callback(epoch: Callable[[str], Epoch]) -> None:
    window = epoch("train").steps(100).span(hook_series("train", "Printer"), 300).window()
    assert judged("CHECKPOINT", case(window)) == []  # another callback's time is CALLBACK_OVERHEAD's


# ---- RESIDUAL -------------------------------------------------------------------------------------


def test_residual_fires_with_the_unmeasured_time_and_says_when_it_happened(
    epoch: Callable[[str], Epoch],
) -> None:
    e = epoch("train")
    for _ in range(5):  # 5 turns of 100 ms: 20 ms waiting, 40 ms stepping, 40 ms nobody timed
        e.waits(20).steps(40)
        e.clock.advance(40_000_000)
    e.clock.advance(100_000_000)  # and 100 ms after the last step
    window = e.window(epoch=3, wall_s=0.600)
    v = fires("RESIDUAL", case(window))
    assert v.share == pytest.approx(0.300 / 0.600)
    assert v.evidence["between_steps_s"] == pytest.approx(0.160)  # the 4 gaps between steps
    assert v.evidence["after_last_step_s"] == pytest.approx(0.140)  # the last turn's 40 ms, then 100
    assert v.subject == "between_steps"
    assert "ProfilerWindows(epochs=[3], stages=['train'])" in v.action  # a script: no hook was timed


def test_residual_at_the_epochs_end_of_a_lightning_fit_names_a_window_that_holds_it(
    epoch: Callable[[str], Epoch],
) -> None:
    e = epoch("val").span(hook_series("val", "perfkit"), 1)
    e.steps(*[10] * 20)
    e.clock.advance(300_000_000)
    v = fires("RESIDUAL", case(e.window(epoch=1, wall_s=0.501)))
    assert v.subject == "after_last_step"
    assert "ProfilerCallback(profile_epochs=[1], stages=['val'], skip_first=17, warmup_steps=0)" in v.action


def test_residual_is_silent_below_a_tenth_of_the_epoch(epoch: Callable[[str], Epoch]) -> None:
    window = epoch("train").waits(100).steps(801).window()  # 99 ms unmeasured
    assert judged("RESIDUAL", case(window)) == []


def test_residual_says_nothing_when_every_second_of_the_epoch_was_timed(
    epoch: Callable[[str], Epoch],
) -> None:
    window = epoch("train").waits(100).steps(900).window()
    assert judged("RESIDUAL", case(window)) == []


# ---- INPUT_BOUND: the cause inside the wait -----------------------------------------------------------


def test_input_bound_without_workers_names_the_section_that_made_the_batches(
    epoch: Callable[[str], Epoch],
) -> None:
    e = epoch("train")
    for _ in range(4):  # each 100 ms wait: 90 ms in slow_transform, 10 ms in collate
        with perfkit.section("train.data.wait", registry=e.reg):
            e.section("slow_transform", 90).section("collate", 10)
        e.steps(50)
    v = fires("INPUT_BOUND", case(e.window()))
    assert v.share == pytest.approx(0.400)
    assert "of its 400.00 ms of waiting, 360.00 ms (90%) was slow_transform, run in this process" in v.message
    assert v.evidence["wait_section_s"] == pytest.approx(0.360)


def test_residual_is_silent_below_a_millisecond_a_step_whatever_its_share(
    epoch: Callable[[str], Epoch],
) -> None:
    """A short epoch's few milliseconds of the framework's own loop are no finding."""
    window = epoch("val").steps(*[2] * 4).window(wall_s=0.0115)  # 3.5 ms unmeasured: 30%, under 4 ms
    assert judged("RESIDUAL", case(window)) == []
