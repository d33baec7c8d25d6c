"""A loader trial's advice followed blind on the plain-script path: a loop over a DataLoader
whose ``__getitem__`` sleeps, without workers, runs ``perfkit.trial`` on its loader first
(recorded in the run directory), then trains (``perfkit.window`` over an instrumented loader).
The run directory is diagnosed as a user would (``diagnose(read_run(...))``): INPUT_BOUND's
proposal and gain come from the trial's measured rates, not from the model of a worker's rate.
The change is applied literally and both runs are timed by the test's own clock, as in
``test_advice_followed`` (the median of interleaved runs, the epochs past the first).

Figures on this 2-core machine (shared with other work), 2026-11, two runs of this file before
the trial went past the cores
(``pytest -o junit_family=legacy --junitxml=OUT.xml``; the figures are its ``property`` lines):
the trial measured 80-82 batches/s at 0 workers, 79 at 1 and 163 at 2 (none keeps up with the
loop's ~700/s; 2 is the fastest, the trial's pick); INPUT_BOUND proposed
``num_workers=2, persistent_workers=True`` with a gain of 49.6-54.2% and 50.8-55.2% of the epoch;
the saving measured was 49.5% and 51.6% (the two steady epochs: 1.29 s -> 0.65 s, 0.62 s). The
same windows without the trial proposed 4 workers for 72-77% (the model's guess of a worker's
rate, not tried).

Since the trial goes past the cores while its workers wait and its rate still rises (2026-11,
five runs, the machine under a load average of 3-4 from other work): 140-163 batches/s at 2
workers, 266-321 at 4, 479-709 at 8 (four a core, the most it tries), so the pick and the
proposal are 8 workers (persistent), which keep up with the loop's ~400 batches/s: a gain of
78.6-81.0% at its low end and 85.1-86.5% at its high, the same as the model's guess of 7-8
workers (both end the wait); the saving measured was 70.1-72.7%, below the low end by 7-10
points, inside the noise those runs measured (8-14 points): the low end of a gain at 8 workers
on 2 cores, beside the model's thread, was optimistic by about that much. The low end now keeps
more slack for the workers past the cores, each its CPU share of a core
(``perfkit.findings.workers._model.preempted``: their wake-ups preempt the loop's thread): 71.0%
predicted at the low end, 79.7% saved on a quieter machine.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from perfkit.findings import diagnose
from perfkit.run import read_run
from tests.torch.test_advice_followed import SLOWDOWN, Plan, Rows, interleaved, proposal, run

pytestmark = pytest.mark.slow


@pytest.mark.filterwarnings("ignore:This DataLoader will create")  # the pick: 8 workers on 2 cores
def test_the_trials_pick_is_proposed_with_its_measured_gain_and_delivers_it(
    tmp_path: Path, record_property: Any
) -> None:
    plan = Plan(Rows(1536, sleep_s=0.0003))
    modelled, first = run(plan, tmp_path / "run", trial_s=6.0)
    recorded = read_run(tmp_path / "run")
    (trial,) = recorded.trials
    assert trial.best is not None

    v = proposal(diagnose(recorded))
    assert v is not None
    assert v.kind == "INPUT_BOUND"
    assert v.change["num_workers"] == trial.best.num_workers > 0  # the trial's pick
    rate = trial.rates()[v.change["num_workers"]].batches_per_s
    assert f"measured alone: {rate:.0f} batches/s" in v.action  # the gain is from the measured rate
    assert v.gain is not None
    assert 0 < v.gain[0] <= v.gain[1] <= v.share + 1e-9
    without = proposal(modelled)  # the same windows without the trial: the model's own guess
    assert without is not None
    assert "measured alone" not in without.action
    # the measured rate gives another gain than the model's guess, but where both end the wait (the
    # trial goes past the cores while sleeping workers still speed up, and finds a count that keeps up)
    assert without.gain != v.gain or "keep up with the loop" in v.action

    timed = interleaved(plan, v.change, first)
    saving = timed.saving
    record_property("trial", [f"{s.label}: {s.batches_per_s:.0f}/s" for s in trial.settings])
    record_property("verdict", f"{dict(v.change)} gain {v.gain[0]:.3f}-{v.gain[1]:.3f}")
    record_property("modelled", f"{dict(without.change)} gain {without.gain}")
    record_property("seconds", f"{timed.before} -> {timed.after}")
    record_property("saving", round(saving, 3))
    record_property("noise", round(timed.noise, 3))
    assert saving >= -timed.within(SLOWDOWN)
    assert saving >= 0.5 * v.gain[0] - timed.noise, (v.action, saving)
    # from a measured rate, the low end holds within the noise this run measured (CI, with other
    # work on both cores, once measured 49.2% against a fixed bound of 50.4%)
    assert saving >= v.gain[0] - timed.within(SLOWDOWN)
    assert saving <= v.gain[1] + timed.within(0.10)  # the measured rate's high end holds, within noise
