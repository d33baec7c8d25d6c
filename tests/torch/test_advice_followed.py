"""Advice followed blind: each planted run is timed as configured, then with its top verdict's
``change`` applied literally, by the test's own clock (the median of interleaved runs, the epochs
past the first). No followed advice may slow the run by more than 5%, and the saving measured
must be at least half of the predicted gain's low end; each bound is widened by the noise the
test measured in its own runs where that is larger, and pairs are added until it is narrow
(``tests/paired.py``), so a busy machine cannot flip the answer.

The scenarios (plain scripts, ``perfkit.window`` over an instrumented DataLoader, on this
machine's cores): a cheap loader without workers; a ``__getitem__`` that sleeps (I/O) without
workers, and in 2 workers that need 8; a CPU-bound collate in 2 workers with the model on 2
threads (contention: the advice is fewer torch threads); non-persistent workers with a slow
``worker_init_fn``.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import torch
from torch.utils.data import DataLoader, Dataset

import perfkit
import perfkit.torch
from perfkit._cli import main
from perfkit.findings import Diagnosis, Verdict, compare_runs, diagnose_windows
from perfkit.run import RunWriter, read_run
from tests.paired import Paired, paired

SLOWDOWN = 0.05


class Rows(Dataset[torch.Tensor]):
    """Rows of 256 floats; each ``__getitem__`` sleeps ``sleep_s`` (a disk, a network)."""

    def __init__(self, n: int, sleep_s: float = 0.0) -> None:
        self.x = torch.randn(n, 256)
        self.sleep_s = sleep_s

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int) -> torch.Tensor:
        if self.sleep_s:
            time.sleep(self.sleep_s)
        return self.x[i]


def busy_collate(rows: list[torch.Tensor]) -> torch.Tensor:
    """A collate that computes for about 6 ms in Python (a tokenizer, an augmentation)."""
    end = time.thread_time() + 0.006
    while time.thread_time() < end:
        pass
    return torch.stack(rows)


def slow_init(worker_id: int) -> None:
    time.sleep(0.25)  # a dataset opened in every worker


@dataclass
class Plan:
    dataset: Dataset[torch.Tensor]
    loader: dict[str, Any] = field(default_factory=dict)
    threads: int = 1
    epochs: int = 3
    batch: int = 32
    body_s: float = 0.0  # the loop's own time beyond the model's step (a GPU's, a logger's), slept


class Model:
    def __init__(self) -> None:
        torch.manual_seed(0)
        self.net = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 256))
        self.opt = torch.optim.SGD(self.net.parameters(), lr=0.01)

    def step(self, batch: torch.Tensor) -> None:
        loss = self.net(batch).pow(2).mean()
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()


def run(
    plan: Plan, run_dir: Path | None = None, *, trial_s: float | None = None
) -> tuple[Diagnosis, list[float]]:
    """One run of the plan: its diagnosis (of its windows alone) and each epoch's seconds by the
    test's clock; ``trial_s``: first a loader trial of that budget, recorded in ``run_dir``."""
    before = torch.get_num_threads()
    torch.set_num_threads(plan.threads)
    reg, windows, epochs = perfkit.Registry(), [], []
    writer = RunWriter(run_dir) if run_dir is not None else None
    model = Model()
    try:
        with perfkit.use_registry(reg):
            loader = DataLoader(plan.dataset, batch_size=plan.batch, **plan.loader)
            if trial_s is not None:
                assert writer is not None, "a trial is recorded in a run directory"
                perfkit.trial(loader, name="train", budget_s=trial_s, run=writer)
            perfkit.torch.instrument(loader, "train", registry=reg)
            for epoch in range(plan.epochs):
                t0 = time.perf_counter()
                with perfkit.window("train", epoch=epoch, registry=reg, run=writer) as w:
                    for batch in w.iterate(loader):
                        model.step(batch)
                        if plan.body_s:
                            time.sleep(plan.body_s)
                epochs.append(time.perf_counter() - t0)
                assert w.window is not None
                windows.append(w.window)
            del loader  # persistent workers end with it
            if writer is not None:
                writer.finish(reg.snapshot())
    finally:
        torch.set_num_threads(before)
    return diagnose_windows(windows), epochs


def followed(plan: Plan, change: Mapping[str, Any]) -> Plan:
    """The plan with ``change`` applied literally."""
    loader = dict(plan.loader)
    threads = plan.threads
    for key, value in change.items():
        if key == "torch_threads":
            threads = int(value)
        elif key != "loader":
            loader[key] = value
    return Plan(plan.dataset, loader, threads, plan.epochs, plan.batch, plan.body_s)


def proposal(d: Diagnosis) -> Verdict | None:
    """The most important verdict that proposes a change, if any."""
    return next((v for v in d.verdicts if v.change), None)


@dataclass
class Outcome:
    verdict: Verdict | None
    timed: Paired

    @property
    def saving(self) -> float:
        return self.timed.saving


def two_runs(plan: Plan) -> Outcome:
    """Run the plan, follow its advice, and time both (epochs past the first, median of pairs)."""
    d, first = run(plan)
    v = proposal(d)
    if v is None:
        return Outcome(None, Paired((sum(first[1:]),), (sum(first[1:]),)))
    return Outcome(v, interleaved(plan, v.change, first))


def interleaved(plan: Plan, change: Mapping[str, Any], first: list[float]) -> Paired:
    """The steady times (epochs past the first) of ``plan`` and of it with ``change`` followed,
    interleaved; ``first`` is the plan's run already made."""
    after_plan = followed(plan, change)
    return paired(lambda: sum(run(plan)[1][1:]), lambda: sum(run(after_plan)[1][1:]), sum(first[1:]))


def check(outcome: Outcome, record_property: Any) -> None:
    v, timed = outcome.verdict, outcome.timed
    record_property("verdict", None if v is None else f"{v.kind} {dict(v.change)} gain {v.gain}")
    record_property("saving", round(outcome.saving, 3))
    record_property("noise", round(timed.noise, 3))
    assert outcome.saving >= -timed.within(SLOWDOWN), f"following {v.change if v else None} slowed the run"
    if v is not None and v.gain is not None:
        assert outcome.saving >= 0.5 * v.gain[0] - timed.noise, (v.line, timed)


def test_a_cheap_loader_without_workers_gets_no_worker_change_that_slows_it(record_property: Any) -> None:
    outcome = two_runs(Plan(Rows(4096), threads=2))
    check(outcome, record_property)
    if outcome.verdict is not None:
        assert outcome.verdict.change.get("num_workers", 0) == 0 or outcome.verdict.gain is not None


def test_a_sleeping_getitem_gets_workers_that_speed_it_up_within_the_prediction(record_property: Any) -> None:
    outcome = two_runs(Plan(Rows(1536, sleep_s=0.0003)))
    v = outcome.verdict
    assert v is not None
    assert v.kind == "INPUT_BOUND"
    assert v.change["num_workers"] >= 1
    assert v.gain is not None
    assert v.gain[1] <= v.share + 1e-9
    check(outcome, record_property)
    assert outcome.saving <= v.gain[1] + outcome.timed.within(0.10)


def test_a_cpu_bound_collate_on_every_core_claims_no_gain_beyond_the_cores(record_property: Any) -> None:
    loader = {"num_workers": 2, "persistent_workers": True, "collate_fn": busy_collate}  # no restarts
    outcome = two_runs(Plan(Rows(1536), loader, threads=2))
    v = outcome.verdict
    # No gain is claimed beyond the cores: no more workers than there are cores. Where contention
    # shows in the steps (their mean past 1.3x their median: it did in 6 of 7 runs here, and not in
    # one run of the whole suite), CONTENTION proposes fewer torch threads rather than COMPUTE_BOUND
    # a faster model; its rule is pinned on hand-built epochs in tests/findings/test_rules_advice.py.
    assert v is None or v.change.get("num_workers", 0) <= 2
    if v is not None and v.kind == "CONTENTION":
        assert v.change == {"torch_threads": 1}
    assert v is None or v.kind in ("CONTENTION", "INPUT_BOUND")
    check(outcome, record_property)


def test_workers_that_sleep_are_proposed_past_the_cores_and_save_what_was_predicted(
    record_property: Any,
) -> None:
    """2 workers sleep 40 ms a batch against a 5 ms loop: 6 to 8 keep up, past twice the cores (on 2
    cores, 4 was the old cap, and the words then said a 1%-CPU batch was 'made by computing');
    followed, the saving lands within the predicted interval, widened by the noise measured here
    and, above, by the workers' start each epoch the persistent pool also saves (CI measured 64.3%
    against 57-60.5% predicted)."""
    plan = Plan(Rows(320, sleep_s=0.005), {"num_workers": 2}, batch=8, body_s=0.005)
    d, first = run(plan)
    v = proposal(d)
    assert v is not None
    assert v.kind == "INPUT_BOUND"
    assert v.change["num_workers"] >= 6  # 40 ms against 5-7 ms of loop: 6 to 8 (the old cap: 4 on 2 cores)
    assert v.change["persistent_workers"] is True
    assert v.gain is not None
    outcome = Outcome(v, interleaved(plan, v.change, first))
    check(outcome, record_property)
    # the persistent pool the change sets also saves the workers' start each epoch: EPOCH_BOUNDARY's
    # claim, not INPUT_BOUND's (under its threshold, a twentieth of the epoch, where it did not fire)
    start = next((x.share for x in (*d.verdicts, *d.context) if x.kind == "EPOCH_BOUNDARY"), 0.05)
    slack = outcome.timed.within(0.03)
    assert v.gain[0] - slack <= outcome.saving <= v.gain[1] + start + slack, (v.line, outcome.timed)


def test_a_slow_worker_init_without_persistent_workers_gets_a_persistent_pool(record_property: Any) -> None:
    plan = Plan(Rows(512), {"num_workers": 2, "worker_init_fn": slow_init}, epochs=4)
    outcome = two_runs(plan)
    v = outcome.verdict
    assert v is not None
    assert v.kind == "EPOCH_BOUNDARY"
    assert v.change.get("persistent_workers") is True
    check(outcome, record_property)


def test_compare_says_whether_run_b_made_the_change_and_gates_a_regression(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plan = Plan(Rows(768, sleep_s=0.0003))
    d, _ = run(plan, tmp_path / "a")
    v = proposal(d)
    assert v is not None
    run(followed(plan, v.change), tmp_path / "b")
    c = compare_runs(read_run(tmp_path / "a"), read_run(tmp_path / "b"))
    assert c.conclusion == "IMPROVEMENT"
    assert "run B made it and saved" in c.advice
    assert main(["compare", str(tmp_path / "a"), str(tmp_path / "b"), "--fail-on-regression", "5"]) == 0
    assert "run A's INPUT_BOUND proposed num_workers=" in capsys.readouterr().out
    assert main(["compare", str(tmp_path / "b"), str(tmp_path / "a"), "--fail-on-regression", "5"]) == 3
    # run A again, without the change: the proposal was not made
    run(plan, tmp_path / "c")
    c = compare_runs(read_run(tmp_path / "a"), read_run(tmp_path / "c"))
    assert "run B did not make it (num_workers=0" in c.advice


@pytest.fixture(autouse=True)
def _quiet() -> Any:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield
