"""Each run rule on hand-built stage epochs: it fires with the share its numbers give, stays silent
just below its threshold, and abstains naming the input it lacks (or, where no input can be
missing, says nothing at all). No fit and no sleep: the loop's records are planted on a fake clock
and every window has a wall time of one second, so a share is the planted seconds themselves."""

from __future__ import annotations

import importlib
import inspect
import sys
from collections.abc import Callable, Sequence
from dataclasses import replace

import pytest

import perfkit
from perfkit import Snapshot
from perfkit.findings import KINDS, RULES, Abstention, Case, Verdict
from perfkit.names import (
    hook_series,
    iter_series,
    loader_setup_series,
    setting_gauge,
    step_series,
    wait_series,
)
from perfkit.stages import Account, RankPart, StageWindow
from tests.conftest import FakeClock
from tests.stages.windows import stage_window

MS = 1_000_000
WALL_S = 1.0


class Epoch:
    """One stage epoch of a loop, recorded in order on the fake clock; times in milliseconds."""

    def __init__(self, reg: perfkit.Registry, clock: FakeClock, stage: str) -> None:
        self.reg, self.clock, self.stage = reg, clock, stage
        self.since = reg.cursor()

    def span(self, name: str, *ms: float) -> Epoch:
        for m in ms:
            t = self.clock()
            self.clock.advance(round(m * MS))
            self.reg.record(name, t, self.clock())
        return self

    def waits(self, *ms: float) -> Epoch:
        return self.span(wait_series(self.stage), *ms)

    def steps(self, *ms: float) -> Epoch:
        return self.span(step_series(self.stage), *ms)

    def section(self, name: str, ms: float) -> Epoch:
        with perfkit.section(name, registry=self.reg):
            self.clock.advance(round(ms * MS))
        return self

    def memory(self, mb: float) -> Epoch:
        self.reg.gauge("process.rss_mb", mb)
        return self

    def window(self, epoch: int = 0, *, samples: int | None = None, wall_s: float = WALL_S) -> StageWindow:
        """The window a recorder would hand over: this epoch's records and the account made of them."""
        return stage_window(
            self.stage, epoch, self.reg.snapshot(since=self.since), wall_s=wall_s, samples=samples
        )


@pytest.fixture
def epoch(reg: perfkit.Registry, clock: FakeClock) -> Callable[[str], Epoch]:
    return lambda stage: Epoch(reg, clock, stage)


def case(
    window: StageWindow, *, history: Sequence[StageWindow] = (), train: StageWindow | None = None
) -> Case:
    """The window judged alone: the run is this stage epoch, so ``run_share`` is ``share``."""
    return Case(window, tuple(history), train, cores=4, stage_wall_s=window.wall_s, run_wall_s=window.wall_s)


def judged(kind: str, subject: Case) -> list[Verdict | Abstention]:
    """What the rule of ``kind`` in ``RULES`` concludes: the path a diagnosis takes."""
    [rule] = [r for r in RULES if r.kind == kind]
    return rule.apply(subject)


def fires(kind: str, subject: Case) -> Verdict:
    [outcome] = judged(kind, subject)
    assert isinstance(outcome, Verdict), outcome
    assert (outcome.kind, outcome.run_share) == (kind, outcome.share)
    return outcome


def abstains(kind: str, subject: Case) -> str:
    [outcome] = judged(kind, subject)
    assert isinstance(outcome, Abstention), outcome
    assert (outcome.rule, outcome.stage, outcome.epoch) == (kind, subject.stage, subject.window.epoch)
    return outcome.missing


# ---- INPUT_BOUND ------------------------------------------------------------------------------------


def test_input_bound_fires_with_the_share_of_the_epoch_spent_waiting(epoch: Callable[[str], Epoch]) -> None:
    window = epoch("train").waits(100, 100, 100, 100).steps(50, 50, 50, 50).window()
    v = fires("INPUT_BOUND", case(window))
    assert v.share == pytest.approx(0.400)  # 4 waits of 100 ms in 1 s (the first no slower than the rest)
    assert v.subject == "train"
    assert v.evidence["data_wait_s"] == pytest.approx(0.400)
    assert "num_workers > 0" in v.action  # no worker records: the batches are made in the loop's process


def test_input_bound_is_silent_below_a_tenth_of_the_epoch(epoch: Callable[[str], Epoch]) -> None:
    window = epoch("train").waits(24, 24, 24, 24).steps(50, 50, 50, 50).window()
    assert judged("INPUT_BOUND", case(window)) == []  # 96 ms of 1 s


def test_input_bound_abstains_when_the_loader_was_not_timed(epoch: Callable[[str], Epoch]) -> None:
    window = epoch("train").steps(50, 50, 50, 50).window()
    assert "train.data.wait" in abstains("INPUT_BOUND", case(window))


# ---- EPOCH_BOUNDARY ------------------------------------------------------------------------------


def test_epoch_boundary_fires_with_the_start_and_the_first_batchs_extra_wait(
    epoch: Callable[[str], Epoch],
) -> None:
    window = epoch("train").span(iter_series("train"), 30).waits(50, 10, 10, 10).window()
    v = fires("EPOCH_BOUNDARY", case(window))
    assert v.share == pytest.approx(0.030 + (0.050 - 0.010))  # iter() and the first batch's extra 40 ms
    assert v.evidence == pytest.approx({"loader_iter_s": 0.030, "first_batch_extra_s": 0.040})


def test_epoch_boundary_names_a_pool_filling_not_files_where_the_loader_was_set_to_workers(
    epoch: Callable[[str], Epoch],
) -> None:
    """4 workers whose batches were not timed: the first batch waits for one worker's whole batch,
    and the action says so rather than blaming files opened at every pass."""
    e = epoch("train").span(iter_series("train"), 30).waits(80, 10, 10, 10)
    e.reg.gauge(setting_gauge("train", "num_workers"), 4.0)
    v = fires("EPOCH_BOUNDARY", case(e.window()))
    assert "the 4 workers start their first batches together" in v.action
    assert "files opened" not in v.action


def test_epoch_boundary_is_silent_below_a_twentieth_of_the_epoch(epoch: Callable[[str], Epoch]) -> None:
    window = epoch("train").span(iter_series("train"), 20).waits(39, 10, 10, 10).window()
    assert judged("EPOCH_BOUNDARY", case(window)) == []  # 20 + 29 = 49 ms of 1 s


def test_epoch_boundary_says_nothing_when_the_loader_was_not_timed(epoch: Callable[[str], Epoch]) -> None:
    window = epoch("train").steps(50, 50, 50, 50).window()  # INPUT_BOUND names the missing loader
    assert judged("EPOCH_BOUNDARY", case(window)) == []


# ---- LOADER_SETUP ---------------------------------------------------------------------------------


def test_loader_setup_fires_with_the_share_spent_building_loaders(epoch: Callable[[str], Epoch]) -> None:
    window = epoch("train").span(loader_setup_series("val"), 150).steps(100).window()
    v = fires("LOADER_SETUP", case(window))
    assert (v.share, v.subject) == (pytest.approx(0.150), "val")


def test_loader_setup_is_silent_below_a_tenth_of_the_epoch(epoch: Callable[[str], Epoch]) -> None:
    window = epoch("train").span(loader_setup_series("val"), 99).steps(100).window()
    assert judged("LOADER_SETUP", case(window)) == []


def test_loader_setup_says_nothing_in_an_epoch_that_built_no_loader(epoch: Callable[[str], Epoch]) -> None:
    window = epoch("train").steps(100).window()  # loaders are built once: most epochs build none
    assert judged("LOADER_SETUP", case(window)) == []


# ---- COMPUTE_BOUND ---------------------------------------------------------------------------------


def test_compute_bound_fires_with_the_steps_share_of_the_epoch(epoch: Callable[[str], Epoch]) -> None:
    window = epoch("train").steps(*[100] * 6).window()
    v = fires("COMPUTE_BOUND", case(window))
    assert v.share == pytest.approx(0.600)
    assert v.evidence["step_fraction"] == pytest.approx(0.600)


def test_compute_bound_is_silent_below_half_the_epoch(epoch: Callable[[str], Epoch]) -> None:
    window = epoch("train").steps(*[70] * 7).window()
    assert judged("COMPUTE_BOUND", case(window)) == []  # 490 ms of 1 s


def test_compute_bound_leaves_out_the_timed_wait_for_the_other_ranks(epoch: Callable[[str], Epoch]) -> None:
    window = epoch("train").steps(*[100] * 8).window()  # 800 ms of steps in 1 s
    waited = replace(window, account=replace(window.account, overlays={"sync_wait": 0.45}))
    assert judged("COMPUTE_BOUND", case(waited)) == []  # 350 ms of compute: a straggler's wait, not the model
    lighter = replace(window, account=replace(window.account, overlays={"sync_wait": 0.2}))
    v = fires("COMPUTE_BOUND", case(lighter))
    assert v.share == pytest.approx(0.600)
    assert "its 20% waiting for the other ranks in the gradient all-reduce left out" in v.message


def test_compute_bound_abstains_when_no_step_was_timed(epoch: Callable[[str], Epoch]) -> None:
    window = epoch("train").waits(10, 10).window()
    assert "train.step" in abstains("COMPUTE_BOUND", case(window))


# ---- SLOW_SECTION -----------------------------------------------------------------------------------


def test_slow_section_fires_with_the_sections_own_time(epoch: Callable[[str], Epoch]) -> None:
    window = epoch("train").section("forward", 300).section("log", 20).window()
    v = fires("SLOW_SECTION", case(window))
    assert (v.share, v.subject) == (pytest.approx(0.300), "forward")
    assert v.evidence == pytest.approx({"self_s": 0.300, "calls": 1.0})


def test_slow_section_is_silent_below_a_tenth_of_the_epoch(epoch: Callable[[str], Epoch]) -> None:
    window = epoch("train").section("forward", 99).window()
    assert judged("SLOW_SECTION", case(window)) == []


def test_slow_section_says_nothing_when_the_loop_timed_no_section(epoch: Callable[[str], Epoch]) -> None:
    """It cannot abstain: sections are the user's own marks, and a loop with none is an ordinary loop,
    not one that lost an input. perfkit's own series (the steps here) are not sections."""
    window = epoch("train").steps(*[100] * 6).window()
    assert judged("SLOW_SECTION", case(window)) == []


def merged(*epochs: tuple[Epoch, float]) -> StageWindow:
    """One stage epoch over ranks 0..n-1 as the recorder merges it: each rank's (records, own wall)."""
    windows = [e.window(wall_s=wall) for e, wall in epochs]
    parts = tuple(RankPart(i, w.wall_s, 0, 0.0, w.account) for i, w in enumerate(windows))
    return replace(
        windows[0],
        snapshot=windows[0].snapshot.merge(*(w.snapshot for w in windows[1:])),
        wall_s=max(w.wall_s for w in windows),
        account=Account.mean(w.account for w in windows),
        ranks=parts,
    )


def test_slow_section_on_several_ranks_is_the_mean_ranks_share_of_its_own_epoch(
    reg: perfkit.Registry, clock: FakeClock
) -> None:
    """Two ranks, each with a 150 ms forward in its own one-second epoch: 15% on each rank's clock.
    The merged snapshot holds 300 ms of forward: against one rank's wall that read as 30%."""
    ranks_ = [Epoch(perfkit.Registry(clock=clock), clock, "train") for _ in range(2)]
    for e in ranks_:
        e.section("forward", 150)
    v = fires("SLOW_SECTION", case(merged(*((e, WALL_S) for e in ranks_))))
    own = [0.150 / WALL_S] * 2  # each rank's share by its own clock
    assert v.share == pytest.approx(sum(own) / 2)
    assert v.evidence == pytest.approx({"self_s": 0.150, "calls": 1.0, "ranks": 2.0, "rank_wall_s": WALL_S})
    assert "15% of the training epoch on the mean of 2 ranks" in v.message


def test_slow_section_share_lies_between_the_ranks_own_shares(clock: FakeClock) -> None:
    """Ranks of unequal walls and sections: the merged share is the mean rank's (mean section seconds
    over mean wall), never above the slowest rank's own share nor below the fastest's."""
    plan = [(100, 1.0), (300, 1.2), (200, 0.8), (120, 1.0)]  # (forward ms, wall s) per rank
    ranks_ = []
    for ms, wall in plan:
        e = Epoch(perfkit.Registry(clock=clock), clock, "train").section("forward", ms)
        ranks_.append((e, wall))
    v = fires("SLOW_SECTION", case(merged(*ranks_)))
    own = [ms / 1e3 / wall for ms, wall in plan]
    mean_rank = sum(ms / 1e3 for ms, _ in plan) / sum(wall for _, wall in plan)
    assert v.share == pytest.approx(mean_rank)
    assert min(own) <= v.share <= max(own)
    assert v.share == pytest.approx(sum(own) / len(own), rel=0.1)  # near the mean of the ranks' own shares


# ---- CALLBACK_OVERHEAD ------------------------------------------------------------------------------


def test_callback_overhead_fires_on_the_costliest_callback(epoch: Callable[[str], Epoch]) -> None:
    e = epoch("train").span(hook_series("train", "ModelCheckpoint"), 50, 30)
    window = e.span(hook_series("train", "Printer"), 20).window()
    v = fires("CALLBACK_OVERHEAD", case(window))
    assert (v.share, v.subject) == (pytest.approx(0.080), "ModelCheckpoint")


def test_callback_overhead_is_silent_below_a_twentieth_of_the_epoch(epoch: Callable[[str], Epoch]) -> None:
    window = epoch("train").span(hook_series("train", "ModelCheckpoint"), 49).window()
    assert judged("CALLBACK_OVERHEAD", case(window)) == []


def test_callback_overhead_says_nothing_when_no_hook_was_timed(epoch: Callable[[str], Epoch]) -> None:
    window = epoch("train").steps(100).window()  # a plain loop has no callbacks
    assert judged("CALLBACK_OVERHEAD", case(window)) == []


# ---- EVAL_SLOWER_THAN_TRAIN -------------------------------------------------------------------------


def test_eval_slower_than_train_fires_with_the_excess_time_per_sample(epoch: Callable[[str], Epoch]) -> None:
    train = epoch("train").waits(100).steps(400).window(samples=200)  # 5 ms a sample
    val = epoch("val").waits(600).steps(200).window(samples=100)  # 10 ms a sample
    v = fires("EVAL_SLOWER_THAN_TRAIN", case(val, train=train))
    assert v.share == pytest.approx(1 - 1 / 2.0)  # twice training's time per sample: half of it is excess
    assert v.evidence["time_per_sample_ratio"] == pytest.approx(2.0)
    assert v.subject == "data wait"  # 6 ms a sample of waiting against training's 0.5 ms


def test_eval_slower_than_train_is_silent_below_one_and_a_half_times(epoch: Callable[[str], Epoch]) -> None:
    train = epoch("train").steps(400).window(samples=200)
    val = epoch("val").steps(200).window(samples=100, wall_s=0.74)  # 7.4 ms a sample: 1.48x
    assert judged("EVAL_SLOWER_THAN_TRAIN", case(val, train=train)) == []


def test_eval_slower_than_train_abstains_without_a_training_window(epoch: Callable[[str], Epoch]) -> None:
    val = epoch("val").steps(200).window(samples=100)
    assert "training window" in abstains("EVAL_SLOWER_THAN_TRAIN", case(val))


# ---- STRAGGLER ---------------------------------------------------------------------------------------


def ranks(*parts: dict[str, float], epoch: int = 0) -> StageWindow:
    """A training epoch over ranks 0..n-1, each rank's account given in seconds of one second of wall."""
    accounts = [Account(WALL_S, {**p, "other": WALL_S - sum(p.values())}) for p in parts]
    per_rank = tuple(RankPart(i, WALL_S, 10, a.seconds("step") / 10, a) for i, a in enumerate(accounts))
    return StageWindow("train", epoch, Snapshot({}), WALL_S, Account.mean(accounts), ranks=per_rank)


EVEN = {"data_wait": 0.05, "step": 0.50}


def slow_data(rank: int, seconds: float, *, epoch: int, n: int = 4) -> StageWindow:
    """An epoch of ``n`` ranks in which ``rank`` waited ``seconds`` for its data, the others 50 ms."""
    return ranks(*({**EVEN, "data_wait": seconds} if i == rank else EVEN for i in range(n)), epoch=epoch)


def test_straggler_fires_on_the_rank_whose_data_wait_exceeds_the_others() -> None:
    window = ranks(*[{"data_wait": 0.05, "step": 0.50}] * 2, {"data_wait": 0.25, "step": 0.50})
    v = fires("STRAGGLER", case(window))
    assert (v.share, v.subject) == (pytest.approx(0.25 - 0.05), "rank 2")  # its excess over the median


def test_straggler_is_silent_below_a_tenth_of_the_epoch() -> None:
    window = ranks(*[{"data_wait": 0.05, "step": 0.50}] * 2, {"data_wait": 0.149, "step": 0.50})
    assert judged("STRAGGLER", case(window)) == []


def test_the_slowest_of_a_spread_pack_is_no_straggler() -> None:
    """A first epoch: every rank's start-up differs (50-200 ms of data wait); the slowest, 300 ms,
    exceeds the others' median by 200 ms (a fifth of the epoch), less than twice their 150 ms spread."""
    waits = (0.05, 0.30, 0.10, 0.20)
    assert judged("STRAGGLER", case(ranks(*({**EVEN, "data_wait": w} for w in waits)))) == []
    clear = (0.05, 0.50, 0.10, 0.08)  # 420 ms past the median: more than twice the 50 ms spread
    assert fires("STRAGGLER", case(ranks(*({**EVEN, "data_wait": w} for w in clear)))).subject == "rank 1"


def test_straggler_slowest_in_every_epoch_is_chronic() -> None:
    epochs = [slow_data(1, 0.05 + extra, epoch=e) for e, extra in enumerate((0.16, 0.18, 0.20))]
    v = fires("STRAGGLER", case(epochs[-1], history=epochs[:-1]))
    assert (v.subject, v.share) == ("rank 1", pytest.approx(0.20))  # the last epoch's excess
    assert "slowest in 3 of 3 epochs, +18% on average" in v.message
    assert v.evidence["epochs_slowest"] == 3.0
    assert v.evidence["epochs"] == 3.0
    assert v.evidence["excess_fraction_mean"] == pytest.approx(0.18)
    assert v.evidence["rank1_epochs_slowest"] == 3.0
    assert "one-off" not in v.action


def test_straggler_slow_in_one_epoch_is_a_one_off() -> None:
    epochs = [slow_data(2, 0.05, epoch=0), slow_data(2, 0.35, epoch=1), slow_data(2, 0.05, epoch=2)]
    v = fires("STRAGGLER", case(epochs[-1], history=epochs[:-1]))
    assert v.subject == "rank 2"
    assert "not in the last" in v.message
    assert "slowest once in 3 epochs (+30%)" in v.message
    assert v.share == pytest.approx(0.30 / 3)  # what it cost over the stage's epochs
    assert "one-off" in v.action
    assert "epoch 1" in v.action


def test_straggler_lists_the_ranks_slowest_most_often() -> None:
    plan = [(3, 0.30), (3, 0.30), (0, 0.40), (3, 0.25)]
    epochs = [slow_data(r, s, epoch=e) for e, (r, s) in enumerate(plan)]
    v = fires("STRAGGLER", case(epochs[-1], history=epochs[:-1]))
    assert v.subject == "rank 3"
    assert "slowest in 3 of 4 epochs" in v.message
    assert (v.evidence["rank3_epochs_slowest"], v.evidence["rank0_epochs_slowest"]) == (3.0, 1.0)


def synced(*parts: tuple[float, float], data_wait: float = 0.05, epoch: int = 0) -> StageWindow:
    """An epoch of DDP ranks whose steps are all 0.5 s: each rank's (compute, sync wait) given."""
    window = ranks(*({"data_wait": data_wait, "step": c + w} for c, w in parts), epoch=epoch)
    per_rank = tuple(
        replace(r, account=replace(r.account, overlays={"sync_wait": w}))
        for r, (_, w) in zip(window.ranks, parts, strict=True)
    )
    return replace(window, ranks=per_rank)


COMPUTE_STRAGGLER = ((0.20, 0.30), (0.21, 0.29), (0.19, 0.31), (0.49, 0.01))
"""Rank 3 computes 0.29 s longer; the others wait about as long for it; every step is 0.5 s."""


def test_straggler_names_the_rank_whose_compute_the_others_wait_for_though_every_step_is_as_long() -> None:
    v = fires("STRAGGLER", case(synced(*COMPUTE_STRAGGLER)))
    assert (v.subject, v.part) == ("rank 3", "step")  # compute is a piece of the account's step
    assert v.share == pytest.approx(0.49 - 0.20)  # its compute beyond the others' median
    assert "its compute" in v.message
    assert "not its data" in v.message
    assert "ranks 0, 1, 2 wait for it in the gradient all-reduce: 300.00 ms each in the epoch" in v.message
    assert "30.00 ms a step" in v.message  # ten steps
    assert (v.evidence["rank3_compute_s"], v.evidence["rank0_sync_wait_s"]) == (pytest.approx(0.49), 0.30)


def test_without_measured_waits_ranks_with_equal_steps_have_no_straggler() -> None:
    """What the hook fixes: the same epoch, its sync waits not measured, names no one."""
    window = ranks(*({"data_wait": 0.05, "step": c + w} for c, w in COMPUTE_STRAGGLER))
    assert judged("STRAGGLER", case(window)) == []


def test_a_rank_slow_to_get_its_data_is_named_for_its_data_even_where_waits_are_measured() -> None:
    """A rank slow to get data makes the others wait in the all-reduce too: data is compared first."""
    window = synced((0.20, 0.30), (0.20, 0.30), (0.20, 0.0))
    slow = replace(
        window.ranks[2],
        account=replace(window.ranks[2].account, parts={**window.ranks[2].account.parts, "data_wait": 0.35}),
    )
    v = fires("STRAGGLER", case(replace(window, ranks=(*window.ranks[:2], slow))))
    # named for its data; the seconds it claims are the other ranks' wait, inside their steps
    assert (v.subject, v.part) == ("rank 2", "step")
    assert "its data loading" in v.message
    assert "ranks 0, 1 wait for it in the gradient all-reduce" in v.message


def test_a_compute_straggler_in_every_epoch_is_chronic() -> None:
    epochs = [synced(*COMPUTE_STRAGGLER, epoch=e) for e in range(3)]
    v = fires("STRAGGLER", case(epochs[-1], history=epochs[:-1]))
    assert "slowest in 3 of 3 epochs" in v.message
    assert "make rank 3's compute as fast as the others'" in v.action


def test_straggler_says_nothing_on_one_rank(epoch: Callable[[str], Epoch]) -> None:
    """It cannot abstain: a single process has no other rank to wait for it, so there is nothing to
    judge, not an input missing."""
    window = epoch("train").waits(400).steps(100).window()
    assert judged("STRAGGLER", case(window)) == []


# ---- REGRESSION ----------------------------------------------------------------------------------------


def test_regression_fires_with_the_time_the_slower_steps_add(epoch: Callable[[str], Epoch]) -> None:
    before = epoch("train").steps(*[10] * 10).window(0)
    after = epoch("train").steps(*[20] * 10).window(1)
    v = fires("REGRESSION", case(after, history=[before]))
    assert v.share == pytest.approx(10 * (0.020 - 0.010))  # ten steps, each 10 ms slower
    assert v.evidence == pytest.approx(
        {"step_mean_before_s": 0.010, "step_mean_after_s": 0.020, "noise_s": 0.0}
    )


def test_regression_is_silent_below_a_tenth_of_the_step(epoch: Callable[[str], Epoch]) -> None:
    before = epoch("train").steps(*[10] * 10).window(0)
    after = epoch("train").steps(*[10.99] * 10).window(1)  # 9.9% slower, with no noise at all
    assert judged("REGRESSION", case(after, history=[before])) == []


def test_regression_abstains_without_two_steps_in_each_epoch(epoch: Callable[[str], Epoch]) -> None:
    before = epoch("train").steps(10).window(0)
    after = epoch("train").steps(20).window(1)
    assert "train.step" in abstains("REGRESSION", case(after, history=[before]))


# ---- MEMORY_GROWTH ----------------------------------------------------------------------------------


def test_memory_growth_fires_with_the_growth_of_the_peak(epoch: Callable[[str], Epoch]) -> None:
    first = epoch("train").memory(380).memory(400).window(0)
    last = epoch("train").memory(500).window(1)
    v = fires("MEMORY_GROWTH", case(last, history=[first]))
    assert v.evidence["rss_peak_growth"] == pytest.approx(500 / 400 - 1)
    assert v.share == 0.0  # memory explains no time: it is said, never ranked above a cause of slowness


def test_memory_growth_is_silent_below_a_fifth(epoch: Callable[[str], Epoch]) -> None:
    first = epoch("train").memory(400).window(0)
    last = epoch("train").memory(479).window(1)
    assert judged("MEMORY_GROWTH", case(last, history=[first])) == []


def test_memory_growth_abstains_without_a_memory_sampler(epoch: Callable[[str], Epoch]) -> None:
    first = epoch("train").steps(10).window(0)
    last = epoch("train").steps(10).window(1)
    assert "process.rss_mb" in abstains("MEMORY_GROWTH", case(last, history=[first]))


# ---- every rule ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_every_rule_is_specified_here(kind: str) -> None:
    """A new rule needs its three tests: it fires, it is silent below its threshold, it abstains
    (or, where no input can be missing, says nothing)."""
    modules = [
        sys.modules[__name__],
        importlib.import_module("tests.findings.test_rules_hooks"),
        importlib.import_module("tests.findings.test_rules_advice"),
        importlib.import_module("tests.findings.test_rules_parts"),
        importlib.import_module("tests.findings.test_rules_device"),
        importlib.import_module("tests.findings.test_rules_comm"),
    ]
    names = [
        n for m in modules for n, f in inspect.getmembers(m, inspect.isfunction) if n.startswith("test_")
    ]
    prefix = f"test_{kind.lower()}_"
    mine = [n for n in names if n.startswith(prefix)]
    assert any(n.startswith(prefix + "fires") for n in mine), kind
    assert any(n.startswith(prefix + "is_silent_below") for n in mine), kind
    assert any(n.startswith((prefix + "abstains", prefix + "says_nothing")) for n in mine), kind
