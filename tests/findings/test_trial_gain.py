"""Where a loader trial ran, INPUT_BOUND's worker proposal and its gain come from the measured rates."""

from __future__ import annotations

import pytest

from perfkit.findings.workers import LoaderFacts, propose_measured, propose_workers
from perfkit.run import TrialResult, TrialSetting

# 100 steps of 20 ms: 5 ms of loop and 15 ms waiting for a batch that sleeps (no CPU), on 2 cores
FACTS = LoaderFacts(
    "train", steps=100, wall_s=2.0, wait_s=0.015, loop_s=0.005, batch_s=0.015,
    batch_cpu_s=0.0, loop_cpu_s=0.005, workers=0, cores=2,
)  # fmt: skip


def measured(*rates: float) -> TrialResult:
    rows = tuple(TrialSetting(k, 2 if k else None, False, False, 20, r, 0.1) for k, r in enumerate(rates))
    return TrialResult("train", rows, rows[-1], None, 30.0, 3.0, 2, 2)


def test_the_fewest_measured_workers_that_keep_up_are_proposed_where_the_model_guessed_more() -> None:
    modelled = propose_workers(FACTS, share=0.75)
    trial = propose_measured(FACTS, measured(66.0, 210.0, 400.0), share=0.75)  # 1 worker: 210/s >= 200/s
    assert modelled.change["num_workers"] == 3
    assert trial.change["num_workers"] == 1
    assert trial.gain is not None
    assert trial.gain[1] <= 0.75
    assert "measured alone" in trial.said


def test_a_trial_that_found_workers_slower_than_the_model_says_gets_the_measured_gain() -> None:
    trial = propose_measured(
        FACTS, measured(66.0, 66.0, 120.0), share=0.75
    )  # a shared disk: 2 workers, 120/s
    assert trial.change["num_workers"] == 2
    assert trial.gain is not None
    low, high = trial.gain
    # the loop turns at the measured rate, not 3x faster; the first batch is one worker's whole batch
    assert high == pytest.approx((100 * (0.020 - 1 / 120.0) - (0.015 + 0.005 - 1 / 120.0)) / 2.0)
    assert low < high < propose_workers(FACTS, share=0.75).gain[0]  # type: ignore[index]


def test_a_trial_with_no_faster_setting_proposes_no_change() -> None:
    trial = propose_measured(FACTS, measured(66.0, 60.0, 64.0), share=0.75)
    assert not trial.change
    assert "no setting faster" in trial.said
