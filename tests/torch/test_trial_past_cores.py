"""``perfkit.trial`` past the cores: a loader whose batches wait (a disk, a network, a sleep) is
tried at more workers than cores while its rate still rises, a computing one is not, and the text
says why the trial went as far as it did. The rule itself (``perfkit.loaders.grow``) reads rows
only, so it is specified on rows first, without a clock."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from dataclasses import replace

import pytest
from torch.utils.data import DataLoader

import perfkit
from perfkit.loaders import TrialResult, TrialSetting, first_round, grow, next_count
from perfkit.loaders._trial import NEAR, WAITS
from perfkit.reports import trial_text
from tests.torch.trial_data import Busy, Sleepy


def row(k: int, rate: float, busy: float | None) -> TrialSetting:
    return TrialSetting(k, 2 if k else None, False, False, 20, rate, 0.1, None, busy)


WAITING = [row(0, 2.9, 0.0), row(1, 2.8, 0.0), row(2, 5.8, 0.1)]  # the user's report, on 2 cores


def test_waiting_workers_whose_rate_still_rises_are_doubled_past_the_cores() -> None:
    assert next_count(WAITING, 11.0, cores=2) == 4
    assert next_count([*WAITING, row(4, 11.6, 0.1)], None, cores=2) == 8
    assert next_count([*WAITING, row(4, 11.6, 0.1)], 11.0, cores=2) is None  # 4 workers keep up


def test_workers_that_compute_or_no_longer_speed_up_stop_where_they_are() -> None:
    computing = [*WAITING[:2], row(2, 5.8, 1.0)]  # half a core a worker: they share the cores past here
    assert next_count(computing, 11.0, cores=2) is None
    flat = [*WAITING, row(4, 5.8 * (1 + NEAR), 0.1)]  # a shared disk: 4 workers within the noise of 2
    assert next_count(flat, 11.0, cores=2) is None
    unread = [*WAITING[:2], row(2, 5.8, None)]  # CPU not read: taken as computing
    assert next_count(unread, 11.0, cores=2) is None


def test_workers_starved_by_other_work_are_not_taken_for_waiting_ones() -> None:
    starved = replace(WAITING[2], cpu_cores=0.6, ready_cores=1.3)  # ready to compute, waiting for a core
    assert next_count([*WAITING[:2], starved], 11.0, cores=2) is None
    assert next_count([*WAITING[:2], replace(starved, ready_cores=0.1)], 11.0, cores=2) == 4


def test_four_workers_a_core_is_the_most_tried_and_a_stop_there_says_the_rate_still_rose() -> None:
    rows = [*WAITING, row(4, 11.6, 0.1), row(8, 23.0, 0.2)]
    growth = grow(rows, None, cores=2)
    assert growth.count is None
    assert growth.rising
    assert "the most the trial tries" in growth.why


def test_one_core_tries_two_workers_since_one_worker_waits_as_the_main_process_did() -> None:
    assert next_count(WAITING[:2], None, cores=1) == 2
    assert next_count(WAITING[:1], None, cores=1) is None  # no workers measured: nothing to grow


def test_the_text_says_where_the_budget_stopped_a_rate_still_rising() -> None:
    spent = ("4 workers: not run, the 20 s budget was spent",)
    result = TrialResult("train", tuple(WAITING), WAITING[2], 11.0, 20.0, 20.3, 2, 2, spent, own_counts=True)
    said = trial_text(result)
    assert "the rate kept rising at the 2 usable cores, so the trial would go on to 4 workers" in said
    assert "budget" in said
    assert TrialResult.from_dict(result.to_dict()) == result
    old = {k: v for k, v in result.to_dict().items() if k != "own_counts"}  # written before the field
    assert TrialResult.from_dict(old).own_counts is False


@pytest.fixture
def cores() -> Iterator[int]:
    """This thread on two of its cores (one where it has one), as before afterwards: the trial's
    own counts then are 0 to 2 and what lies past them on any machine, so the test stays short."""
    if not hasattr(os, "sched_setaffinity"):
        pytest.skip("no CPU affinity to set on this system")
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, sorted(before)[:2])
    try:
        yield len(os.sched_getaffinity(0))
    finally:
        os.sched_setaffinity(0, before)


def test_a_sleeping_loader_is_tried_past_the_cores_and_is_faster_there(cores: int) -> None:
    loader = DataLoader(Sleepy(4000, 0.020), batch_size=4)  # 80 ms a batch in one worker, all asleep
    need = 1.5 * cores / 0.080  # more than the cores' workers make: 37.5 batches/s on 2 cores
    result = perfkit.trial(loader, need_batches_per_s=need, budget_s=6, batches=8)
    first = {r.num_workers: r for r in first_round(result.settings)}
    held = first[cores].ready_cores or 0.0  # seconds ready to run but waiting for a core, a second
    if held >= WAITS * cores:  # other work held the cores: a wait for data cannot be told from one for a core
        pytest.skip(f"other work held the cores: the workers waited for one {held:.1f} s a second")
    assert max(first) > cores, result.settings
    past, at_cores = first[max(first)], first[cores]
    noise = abs(first[1].batches_per_s - first[0].batches_per_s)  # both make one batch at a time
    assert past.batches_per_s - at_cores.batches_per_s > 2 * noise, result.settings
    assert result.best is not None
    assert result.best.num_workers > cores
    assert f"went past the {cores} usable core" in trial_text(result)


def test_a_computing_loader_is_not_tried_past_the_cores(cores: int) -> None:
    loader = DataLoader(Busy(4000, 0.002), batch_size=4)  # 8 ms of CPU a batch
    result = perfkit.trial(loader, need_batches_per_s=10_000, budget_s=4, batches=15)
    assert result.own_counts
    assert max(r.num_workers for r in result.settings) == cores, result.settings
    assert f"did not go past the {cores} usable core" in trial_text(result)


def test_worker_counts_given_are_the_ones_tried(cores: int) -> None:
    loader = DataLoader(Sleepy(4000, 0.005), batch_size=4)  # 20 ms a batch, asleep: past 1 would help
    result = perfkit.trial(loader, workers=[0, 1], need_batches_per_s=1000, budget_s=3, batches=5)
    assert not result.own_counts
    assert {r.num_workers for r in result.settings} == {0, 1}
    assert "past the" not in trial_text(result)


def test_going_past_the_cores_stays_within_the_budget_and_one_settings_start(cores: int) -> None:
    loader = DataLoader(Sleepy(4000, 0.010), batch_size=4)  # 40 ms a batch: 30 batches take 1.2 s
    t0 = time.perf_counter()
    result = perfkit.trial(loader, need_batches_per_s=1000, budget_s=1.5, batches=30)
    took = time.perf_counter() - t0
    assert took < 1.5 + 1.0  # one setting's slack: its workers' start and first batch
    assert result.settings[0].batches < 30  # 0 workers: cut at its part of the budget
    assert all("budget" in s for s in result.skipped)
