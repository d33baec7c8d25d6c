"""FSDP2 on CPU over gloo (``fully_shard`` per layer, 2 and 4 processes): each rank's exposed waits in
its all-gathers and reduce-scatters, by step part and by collective, checked against the job's own
clock around every collective and ``Work.wait`` (tests/torch/fsdp_job.py), and the slow rank located
in its step.

Every bound is the larger of the figure the issue asks for and the noise measured in the same run:
how far perfkit's and the job's clocks disagree about the same spans (a step part, the epoch), and
how far ranks that do the same work differ from each other.
"""

from __future__ import annotations

import json
import os
import socket
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from perfkit.run import read_run
from perfkit.stages import StageWindow, communication, straggler_parts

HERE = Path(__file__).resolve().parent
JOB = HERE / "fsdp_job.py"
ROOT = HERE.parents[1]
PLANTED_S, SLOW, STEPS = 0.03, 1, 8
LAUNCHER_VARS = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_")
ENV = {k: v for k, v in os.environ.items() if not k.startswith(LAUNCHER_VARS)} | {
    "PYTHONPATH": str(ROOT),
    "OMP_NUM_THREADS": "1",
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run_job(out: Path, mode: str, world: int) -> tuple[list[StageWindow], dict[int, Any]]:
    """The train windows rank 0 wrote, and each rank's own clock."""
    port = str(free_port())
    procs = [
        subprocess.Popen(
            [sys.executable, str(JOB), str(r), str(world), port, str(out / "run"), mode],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=ENV,
            cwd=out,
        )
        for r in range(world)
    ]
    own = {}
    try:
        for p in procs:
            stdout, stderr = p.communicate(timeout=120)
            assert p.returncode == 0, stderr[-3000:]
            line = json.loads(next(x for x in stdout.splitlines() if x.startswith('{"rank"')))
            own[line["rank"]] = line["epochs"]
    finally:
        for p in procs:
            p.kill()
    windows = [w.window for w in read_run(out / "run").windows if w.stage == "train"]
    assert [w.epoch for w in windows] == [0, 1, 2]
    return windows[1:], own  # epoch 0 pays the one-off start-up (gloo's connections in the first all-gather)


@pytest.fixture(scope="module")
def straggler(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[StageWindow], dict[int, Any]]:
    return run_job(tmp_path_factory.mktemp("straggler"), "straggler", 4)


@pytest.fixture(scope="module")
def heavy(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[StageWindow], dict[int, Any]]:
    return run_job(tmp_path_factory.mktemp("heavy"), "heavy", 2)


@pytest.fixture(scope="module")
def balanced(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[StageWindow], dict[int, Any]]:
    return run_job(tmp_path_factory.mktemp("balanced"), "balanced", 2)


def waited(clock: dict[str, Any], phase: str | None = None, collective: str | None = None) -> float:
    """The job's own seconds of waits, in one phase and/or one collective."""
    return sum(
        s
        for key, s in clock["waits"].items()
        if phase in (None, key.split(".")[0]) and collective in (None, key.split(".")[1])
    )


def own_compute(clock: dict[str, Any], phase: str) -> float:
    """A phase's seconds less its waits, by the job's clock."""
    return float(clock["phases"][phase]) - waited(clock, phase)


def clock_noise(window: StageWindow, own: dict[int, Any]) -> float:
    """How far perfkit's spans and the job's clock around the same spans disagree, in seconds: the
    largest difference over ranks and step parts, of the part itself (perfkit's forward starts where
    the step does, a little before the job's clock) and of the waits in it (perfkit's span of each
    call also holds the job's own wrapper)."""
    gaps = []
    for r in window.ranks:
        clock = own[r.rank][window.epoch]
        parts, waits = r.account.subjects["step"], r.account.subjects["collective_wait"]
        for phase in ("forward", "backward"):
            gaps.append(
                abs(parts.get(phase, 0.0) - float(clock["phases"][phase]))
                + abs(waits.get(phase, 0.0) - waited(clock, phase))
            )
    return max(gaps)


def share_bound(window: StageWindow, rank: int, clock: dict[str, Any]) -> float:
    """The issue's 5 points, or the disagreement of perfkit's wall and the job's loop's, if larger."""
    wall = next(r.wall_s for r in window.ranks if r.rank == rank)
    return max(0.05, abs(wall - float(clock["wall_s"])) / float(clock["wall_s"]))


@pytest.mark.slow
def test_the_slow_ranks_excess_is_located_in_forward_and_the_others_wait_in_the_next_all_gather(
    straggler: tuple[list[StageWindow], dict[int, Any]],
) -> None:
    windows, own = straggler
    for window in windows:
        found = straggler_parts(window)
        assert found is not None
        assert (found.rank, found.part) == (SLOW, "forward")
        clocks = {r: own[r][window.epoch] for r in own}
        others = [r for r in clocks if r != SLOW]
        # the excess by the job's clock: the slow rank's forward less its waits, against the others'
        mine = {r: own_compute(clocks[r], "forward") for r in clocks}
        truth = mine[SLOW] - statistics.median(mine[r] for r in others)
        spread = max(mine[r] for r in others) - min(mine[r] for r in others)  # alike ranks differ by this
        noise = max(spread, clock_noise(window, own))
        assert truth == pytest.approx(PLANTED_S * STEPS, rel=0.25)  # the job planted what it meant to
        assert found.excess_s["forward"] == pytest.approx(truth, abs=max(0.1 * truth, noise))
        for part in ("backward", "optimizer"):  # nothing planted there
            assert abs(found.excess_s[part]) <= max(0.1 * truth, noise)
        # the others wait for it in their all-gathers, the next layer's in forward
        theirs = statistics.fmean(waited(clocks[r], collective="all_gather") for r in others)
        assert found.others_wait_s["all_gather"] == pytest.approx(theirs, abs=max(0.1 * theirs, noise))
        behind = statistics.fmean(waited(clocks[r], "forward") for r in others) - waited(
            clocks[SLOW], "forward"
        )
        assert found.others_wait_by_part["forward"] - waited(clocks[SLOW], "forward") == pytest.approx(
            behind, abs=max(0.1 * behind, noise)
        )
        assert behind > 0.75 * PLANTED_S * STEPS


@pytest.mark.slow
def test_a_communication_heavy_models_exposed_share_is_within_5_points_of_the_truth(
    heavy: tuple[list[StageWindow], dict[int, Any]],
) -> None:
    windows, own = heavy
    for window in windows:
        c = communication(window)
        assert c is not None
        assert c.top in ("all_gather", "reduce_scatter")
        for i, r in enumerate(window.ranks):
            clock = own[r.rank][window.epoch]
            truth = waited(clock) / float(clock["wall_s"])
            assert truth > 0.5  # what the model is for: mostly waits in collectives
            assert c.rank_wait_s[i] / r.wall_s == pytest.approx(truth, abs=share_bound(window, r.rank, clock))
            # where: the all-gathers of forward, the all-gathers and reduce-scatters of backward
            subjects = r.account.subjects
            for phase in ("forward", "backward"):
                assert subjects["collective_wait"][phase] == pytest.approx(
                    waited(clock, phase), abs=max(0.05 * waited(clock), clock_noise(window, own))
                )
        # bytes and calls per step, from the tensors' sizes: exactly what the job's clock counted
        clock = own[0][window.epoch]
        for collective in ("all_gather", "reduce_scatter"):
            assert c.bytes_per_step[collective] == pytest.approx(clock["bytes"][collective] / STEPS)
            assert c.calls_per_step[collective] == pytest.approx(clock["calls"][collective] / STEPS)


@pytest.mark.slow
def test_a_balanced_control_has_no_straggler_and_no_share_beyond_the_truth(
    balanced: tuple[list[StageWindow], dict[int, Any]],
) -> None:
    windows, own = balanced
    for window in windows:
        c = communication(window)
        assert c is not None
        noise = clock_noise(window, own)
        for i, r in enumerate(window.ranks):
            clock = own[r.rank][window.epoch]
            truth = waited(clock) / float(clock["wall_s"])
            assert c.rank_wait_s[i] / r.wall_s == pytest.approx(truth, abs=share_bound(window, r.rank, clock))
            # the asynchronous waits: the first layer's prefetched all-gather in forward, the loss's
            # all-reduce after the optimizer step (in the step's rest), each by Work.wait()
            subjects = r.account.subjects
            assert subjects["collectives"]["all_reduce"] == pytest.approx(waited(clock, "rest"), abs=0.001)
            assert subjects["collective_wait"]["rest"] == pytest.approx(waited(clock, "rest"), abs=0.001)
            assert subjects["collective_wait"]["forward"] == pytest.approx(
                waited(clock, "forward"), rel=0.05, abs=noise
            )
        found = straggler_parts(window)
        assert found is not None
        clocks = {r: own[r][window.epoch] for r in own}
        (other,) = [r for r in clocks if r != found.rank]
        for part in ("forward", "backward"):
            truth = own_compute(clocks[found.rank], part) - own_compute(clocks[other], part)
            assert found.excess_s[part] == pytest.approx(truth, abs=2 * noise)
        excess = sum(max(0.0, s) for s in found.excess_s.values()) / found.wall_s
        truth = sum(
            max(0.0, own_compute(clocks[found.rank], p) - own_compute(clocks[other], p))
            for p in ("forward", "backward")
        )
        assert excess <= max(0.05, truth / found.wall_s + 2 * noise / found.wall_s)  # no straggler


def first(windows: list[StageWindow]) -> Any:
    from perfkit.findings import diagnose_windows

    verdicts = diagnose_windows(windows, cores=2).verdicts
    assert verdicts, "no verdict"
    return verdicts


@pytest.mark.slow
def test_the_slow_rank_is_named_in_its_forward_and_the_rest_of_the_waits_are_communications(
    straggler: tuple[list[StageWindow], dict[int, Any]],
) -> None:
    """Over gloo on CPU this job is communication-heavy besides its straggler: even the slow rank,
    which nobody makes wait, is held in collectives most of its epoch. So the waits split in two:
    the others' wait for rank 1's forward (STRAGGLER's), and what every rank waits anyway, the
    slow rank's own wait by its clock (COMMUNICATION_BOUND's)."""
    windows, own = straggler
    verdicts = {v.kind: v for v in first(windows)}
    last = windows[-1]
    wall = next(r.wall_s for r in last.ranks if r.rank == SLOW)
    slow = own[SLOW][last.epoch]
    v = verdicts["STRAGGLER"]
    assert v.subject == f"rank {SLOW}"
    assert "of it in forward" in v.message
    assert "for it in all_gather" in v.message
    clocks = {r: own[r][last.epoch] for r in own}
    mine = {r: own_compute(clocks[r], "forward") for r in clocks}
    excess = mine[SLOW] - statistics.median(mine[r] for r in clocks if r != SLOW)
    noise = clock_noise(last, own)
    assert v.share == pytest.approx(excess / wall, abs=max(0.05, 2 * noise / wall))
    c = verdicts["COMMUNICATION_BOUND"]
    truth = waited(slow) / float(slow["wall_s"])
    assert c.share == pytest.approx(truth, abs=share_bound(last, SLOW, slow) + 2 * noise / wall)


@pytest.mark.slow
def test_the_first_verdict_on_the_communication_heavy_model_is_communication_bound(
    heavy: tuple[list[StageWindow], dict[int, Any]],
) -> None:
    windows, own = heavy
    (v, *_) = first(windows)
    assert v.kind == "COMMUNICATION_BOUND"
    last = windows[-1]
    truth = statistics.fmean(
        waited(own[r.rank][last.epoch]) / float(own[r.rank][last.epoch]["wall_s"]) for r in last.ranks
    )
    bound = max(share_bound(last, r.rank, own[r.rank][last.epoch]) for r in last.ranks)
    assert v.share == pytest.approx(truth, abs=bound)  # the ranks' mean, by their own clocks


@pytest.mark.slow
def test_the_balanced_control_is_named_no_straggler_and_no_communication_above_the_truth(
    balanced: tuple[list[StageWindow], dict[int, Any]],
) -> None:
    windows, own = balanced
    verdicts = {v.kind: v for v in first(windows)}
    assert "STRAGGLER" not in verdicts
    if "COMMUNICATION_BOUND" in verdicts:  # never above what the ranks waited by their own clocks
        last = windows[-1]
        truth = statistics.fmean(
            waited(own[r.rank][last.epoch]) / float(own[r.rank][last.epoch]["wall_s"]) for r in last.ranks
        )
        bound = max(share_bound(last, r.rank, own[r.rank][last.epoch]) for r in last.ranks)
        assert verdicts["COMMUNICATION_BOUND"].share <= truth + bound
