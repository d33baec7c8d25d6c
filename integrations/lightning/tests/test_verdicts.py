"""Planted bottlenecks: the first verdict names the planted cause, its share is within 10 points of
the truth the test measures with its own clocks, and no verdict claims a cause that is not there."""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from lightning.pytorch.callbacks import Callback
from perfkit_lightning import PerfMonitor

from perfkit.findings import Diagnosis, Verdict, compare_runs, diagnose
from perfkit.run import read_run
from perfkit.stages import PARTS

from .jobs import run_job
from .planted import SLOW_COLLATE_S, TRUTH, Plan, Planted, TruthLoader, fit, plant, slow_collate, slow_init

TOLERANCE = 0.10  # points of share between a verdict and the truth
CAUSES = {
    *("INPUT_BOUND", "EPOCH_BOUNDARY", "LOADER_SETUP", "SLOW_SECTION", "CALLBACK_OVERHEAD", "STRAGGLER"),
    *("CHECKPOINT", "MODULE_HOOK", "SLOW_LOGGER", "RESIDUAL"),
}


Check = Callable[[Verdict, float], None]


@pytest.fixture
def against_truth(record_property: Callable[[str, object], None]) -> Check:
    """Checks a verdict's share against the truth and keeps both, with the verdict, in the test's
    properties (``pytest --junitxml=FILE`` writes them: the table of scenarios comes from there)."""

    return truth_check(record_property, TOLERANCE)


def truth_check(record_property: Callable[[str, object], None], tolerance: float) -> Check:
    """A verdict's share against the truth, within ``tolerance`` points, both kept as properties."""

    def check(verdict: Verdict, truth: float) -> None:
        record_property("verdict", f"{verdict.kind} ({verdict.stage}, {verdict.subject})")
        record_property("share", round(verdict.share, 3))
        record_property("truth", round(truth, 3))
        assert verdict.share == pytest.approx(truth, abs=tolerance)

    return check


def run(
    tmp_path: Path,
    plan: Plan,
    *,
    before: list[Callback] = (),  # type: ignore[assignment]
    after: list[Callback] = (),  # type: ignore[assignment]
    module: type[Planted] = Planted,
    **trainer: Any,
) -> Diagnosis:
    # console off: the blocks' first rendering imports the reports, and a later collection of those
    # young objects inside a 10 ms validation epoch is the test process's noise, not the plant's
    monitor = PerfMonitor(
        sample_resources=False, run_dir=str(tmp_path / "run"), top_k_slowest=0, console=False
    )
    fit(plan, str(tmp_path), [*before, monitor, *after], module=module, **trainer)
    diagnosis = diagnose(read_run(tmp_path / "run"), cores=8)
    for window in read_run(tmp_path / "run").windows:  # every account adds up to its wall time
        a = window.window.account
        assert sum(a.seconds(p) for p in PARTS) == pytest.approx(window.wall_s, rel=0.02)
        assert a.overlap_s <= 0.02 * window.wall_s
    claimed: dict[tuple[str, int], float] = {}
    for v in (*diagnosis.verdicts, *diagnosis.context):  # each second has one owner
        claimed[(v.stage, v.epoch)] = claimed.get((v.stage, v.epoch), 0.0) + v.share
    assert all(total <= 1.0 + 1e-9 for total in claimed.values()), claimed
    return diagnosis


def wait_truth(stage: str, made_s: float | None = None) -> tuple[float, float]:
    """The last epoch's steady wait for batches, and its start: iter() and what the first batch
    waited beyond its making (``made_s``: the planted time a worker takes per batch; without
    workers, the other batches' mean wait). The first batch's making is the loader's steady wait."""
    waits = TRUTH.inside(TRUTH.waits[stage], stage)
    iters = sum(TRUTH.inside(TRUTH.iters[stage], stage))
    typical = made_s if made_s is not None else statistics.fmean(waits[1:]) if len(waits) > 1 else waits[0]
    first_extra = max(0.0, waits[0] - typical)
    wall = TRUTH.wall(stage)
    return (sum(waits) - first_extra) / wall, (iters + first_extra) / wall


def only_causes(d: Diagnosis, allowed: set[str]) -> list[Verdict]:
    """Verdicts that claim a cause other than the ones allowed."""
    return [v for v in d.verdicts if v.kind in CAUSES and v.kind not in allowed]


def test_slow_collate_in_too_few_workers_is_input_bound(against_truth: Check, tmp_path: Path) -> None:
    plan = Plan(workers=2, collate=slow_collate, train_step_s=0.01)
    d = run(tmp_path, plan, limit_val_batches=0)
    top = d.verdicts[0]
    assert (top.kind, top.stage, top.subject) == ("INPUT_BOUND", "train", "train")
    assert "slow_collate running in the workers" in top.message  # what the loop was waiting for
    against_truth(top, wait_truth("train", made_s=SLOW_COLLATE_S)[0])
    assert only_causes(d, {"INPUT_BOUND", "EPOCH_BOUNDARY"}) == []
    # stall attribution: nearly every second the loop waited, a worker was in slow_collate
    last = read_run(tmp_path / "run").windows[-1].window
    waited = sum(TRUTH.inside(TRUTH.waits["train"], "train"))
    assert last.account.subjects["stalled_on"]["slow_collate"] == pytest.approx(waited, rel=0.15)


def test_slow_getitem_without_workers_is_input_bound(against_truth: Check, tmp_path: Path) -> None:
    d = run(tmp_path, Plan(train_getitem_s=0.008, train_step_s=0.005), limit_val_batches=0)
    top = d.verdicts[0]
    assert (top.kind, top.stage) == ("INPUT_BOUND", "train")
    assert "num_workers" in top.action
    against_truth(top, wait_truth("train")[0])
    assert only_causes(d, {"INPUT_BOUND"}) == []


def test_slow_forward_in_a_section_is_named(against_truth: Check, tmp_path: Path) -> None:
    d = run(tmp_path, Plan(train_step_s=0.03, train_step_section="forward"), limit_val_batches=0)
    top = d.verdicts[0]
    assert (top.kind, top.subject) == ("SLOW_SECTION", "forward")
    against_truth(top, TRUTH.share("planted", "train"))
    assert only_causes(d, {"SLOW_SECTION"}) == []


def test_slow_forward_without_a_section_is_compute_bound(against_truth: Check, tmp_path: Path) -> None:
    d = run(tmp_path, Plan(train_step_s=0.03), limit_val_batches=0)
    top = d.verdicts[0]
    assert top.kind == "COMPUTE_BOUND"
    against_truth(top, TRUTH.share("planted", "train"))
    assert only_causes(d, set()) == []


def test_slow_validation_postprocessing(against_truth: Check, tmp_path: Path) -> None:
    # training takes 10 ms a step, so the cost of moving its tiny batches stays far below any threshold
    plan = Plan(val_step_s=0.04, val_step_section="postprocess", train_n=32, train_step_s=0.01)
    d = run(tmp_path, plan)
    top = d.verdicts[0]
    assert top.stage == "val"
    assert top.kind in ("EVAL_SLOWER_THAN_TRAIN", "SLOW_SECTION")
    assert "postprocess" in f"{top.subject} {top.message}"
    if top.kind == "SLOW_SECTION":
        truth = TRUTH.share("planted", "val")
    else:
        per_sample = (TRUTH.wall("train") / plan.train_n) / (TRUTH.wall("val") / plan.val_n)
        truth = 1 - per_sample
    against_truth(top, truth)
    section = next(v for v in d.verdicts if v.kind == "SLOW_SECTION" and v.stage == "val")
    assert section.share == pytest.approx(TRUTH.share("planted", "val"), abs=TOLERANCE)
    assert only_causes(d, {"SLOW_SECTION"}) == []


class Sleeps(Callback):
    """A third-party callback that spends 30 ms after every training batch."""

    def on_train_batch_end(self, *args: object, **kwargs: object) -> None:
        plant("Sleeps", 0.03)


@pytest.mark.parametrize("listed", ["before", "after"])
def test_a_slow_callback_is_named_wherever_it_is_listed(
    against_truth: Check, tmp_path: Path, listed: str
) -> None:
    where = {listed: [Sleeps()]}
    d = run(tmp_path, Plan(train_step_s=0.005), limit_val_batches=0, **where)  # type: ignore[arg-type]
    top = d.verdicts[0]
    assert (top.kind, top.subject) == ("CALLBACK_OVERHEAD", "Sleeps")
    against_truth(top, TRUTH.share("planted", "train", what="Sleeps"))
    assert only_causes(d, {"CALLBACK_OVERHEAD"}) == []


def test_a_slow_validation_loader_only(against_truth: Check, tmp_path: Path) -> None:
    d = run(tmp_path, Plan(val_getitem_s=0.01, train_n=32, train_step_s=0.01))
    top = d.verdicts[0]
    assert top.stage == "val"
    assert top.kind in ("INPUT_BOUND", "EVAL_SLOWER_THAN_TRAIN")
    input_bound = next(v for v in d.verdicts if v.kind == "INPUT_BOUND" and v.stage == "val")
    against_truth(input_bound, wait_truth("val")[0])
    assert not [v for v in d.verdicts if v.kind == "INPUT_BOUND" and v.stage == "train"]
    assert only_causes(d, {"INPUT_BOUND"}) == []


class TwoValidationLoaders(Planted):
    """Validation over two loaders in turn: 2 slow batches (40 ms each, the first no slower than
    the second), then 4 fast ones."""

    def val_dataloader(self) -> list[TruthLoader]:  # type: ignore[override]
        return [self._loader("val", 8, 0.01), self._loader("val", 16, 0.0)]

    def validation_step(self, batch: Any, batch_idx: int, dataloader_idx: int = 0) -> None:
        super().validation_step(batch, batch_idx)


def test_several_validation_loaders_each_start_is_compared_with_its_own_batches(
    against_truth: Check, tmp_path: Path
) -> None:
    """Each loader's first batch is judged against that loader's other batches: the slow loader's
    first batch is as slow as its second, so there is no epoch-boundary cost to claim."""
    d = run(tmp_path, Plan(train_n=16), module=TwoValidationLoaders)
    val = [v for v in d.verdicts if v.stage == "val"]
    assert val[0].kind == "INPUT_BOUND"
    waits = TRUTH.inside(TRUTH.waits["val"], "val")
    against_truth(val[0], sum(waits) / TRUTH.wall("val"))
    assert [v.kind for v in val if v.kind == "EPOCH_BOUNDARY"] == []


def test_workers_restarted_each_epoch_with_a_slow_init_are_an_epoch_boundary(
    against_truth: Check, tmp_path: Path
) -> None:
    plan = Plan(workers=2, persistent=False, worker_init=slow_init, train_step_s=0.01, train_n=32)
    d = run(tmp_path, plan, limit_val_batches=0)
    top = d.verdicts[0]
    assert (top.kind, top.stage) == ("EPOCH_BOUNDARY", "train")
    assert "persistent_workers" in top.action
    against_truth(top, wait_truth("train")[1])
    # Restarting workers also ends the last epoch's: torch joins them when Lightning lets go of the
    # old iterator, before the new epoch's first step and outside every timer (docs/diagnosis.md,
    # RESIDUAL). Here that is a few percent of the epoch; on a loaded machine it grew to 21% once,
    # and RESIDUAL then says so, "before the first step": true, and the same planted cause.
    unplanted = only_causes(d, {"EPOCH_BOUNDARY", "INPUT_BOUND"})
    assert [(v.kind, v.subject) for v in unplanted if v.subject != "before_first_step"] == []


def test_validation_workers_restarted_with_a_slow_init_are_the_cause_and_slower_than_training_its_context(
    against_truth: Check, tmp_path: Path
) -> None:
    """The first user's case: validation 3x slower than training per sample because its workers
    restart every epoch with a slow worker_init_fn. The cause comes first, with its action; the
    symptom is said inside it, not as a competing verdict with another action."""
    plan = Plan(workers=2, persistent=False, worker_init=slow_init, train_step_s=0.01, train_n=64, val_n=16)
    d = run(tmp_path, plan)
    val = [v for v in d.verdicts if v.stage == "val"]
    assert val[0].kind == "EPOCH_BOUNDARY"
    assert "persistent_workers" in val[0].action
    assert "training's time per sample" in val[0].context
    assert "EVAL_SLOWER_THAN_TRAIN" not in [v.kind for v in (*d.verdicts, *d.context)]
    against_truth(val[0], wait_truth("val")[1])


def test_a_control_with_nothing_planted_claims_no_cause(tmp_path: Path) -> None:
    t0 = time.perf_counter()
    d = run(tmp_path, Plan(compute=256, train_n=32))
    assert time.perf_counter() - t0 < 60
    assert only_causes(d, set()) == []
    assert all(v.kind in ("COMPUTE_BOUND", "REGRESSION", "MEMORY_GROWTH") for v in d.verdicts[:1])


def test_a_slow_rank_is_named_the_straggler(against_truth: Check, tmp_path: Path) -> None:
    """Four processes over gloo; rank 2 loads its data 3x slower. Each rank's own clocks are the truth."""
    run_job(Path(__file__).with_name("ddp_straggler.py"), tmp_path)
    truth = [json.loads((tmp_path / f"truth_rank{r}.json").read_text()) for r in range(4)]
    d = diagnose(read_run(tmp_path / "run"), cores=8)
    top = d.verdicts[0]
    assert (top.kind, top.subject) == ("STRAGGLER", "rank 2")
    assert "its data loading took" in top.message
    # what the job loses is the other ranks' wait in the gradient all-reduce, inside their steps:
    # not compute (COMPUTE_BOUND leaves the timed wait out), and claimed by the straggler
    assert top.part == "step"
    assert "COMPUTE_BOUND" not in [v.kind for v in d.verdicts]
    others = sorted(truth[r]["wait"][-1] for r in (0, 1, 3))
    excess = truth[2]["wait"][-1] - others[1]  # beyond the other ranks' median
    against_truth(top, excess / truth[2]["wall"][-1])
    assert "ranks 0, 1, 3 wait" in top.message


def test_compare_two_runs_says_what_changed_and_why(tmp_path: Path) -> None:
    """The same slow loading with no workers, then with two: an improvement, explained by the data wait."""
    from perfkit._cli import main

    # a batch: 40 ms in one worker, 20 ms in two against a 50 ms step; what two workers leave (moving
    # each batch between processes, ~1 ms here, and making the first batch of each epoch, 40 ms over
    # 16 steps) stays far below INPUT_BOUND's threshold
    slow = Plan(train_n=64, train_getitem_s=0.01, train_step_s=0.05)
    run(tmp_path / "a", slow, limit_val_batches=0)
    run(tmp_path / "b", Plan(**{**slow.__dict__, "workers": 2}), limit_val_batches=0)
    c = compare_runs(read_run(tmp_path / "a" / "run"), read_run(tmp_path / "b" / "run"))
    assert c.conclusion == "IMPROVEMENT"
    assert c.because is not None
    assert (c.because.stage, c.because.part) == ("train", "data_wait")
    assert [v.kind for v in c.gone if v.stage == "train"][:1] == ["INPUT_BOUND"]
    same = compare_runs(read_run(tmp_path / "b" / "run"), read_run(tmp_path / "b" / "run"))
    assert same.conclusion == "NO CHANGE"
    assert main(["compare", str(tmp_path / "a" / "run"), str(tmp_path / "b" / "run"), "--json"]) == 0
