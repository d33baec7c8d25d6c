"""Planted step parts under ``perfkit run``: a plain script over a DataLoader, with no perfkit code
(``tests/autorun_planted_parts.py``), timed by ``python -m perfkit run``. The run's first verdict
names the planted part, with its share of the last epoch within 5 points of the share the
script's own clock measured (``time.perf_counter`` around the planted piece and around the epoch),
plus the noise that clock measured in the same run: the loop bodies' time outside every piece it
timed (the loop's own code, its clocks, a busy machine's preemptions), which either side may count
differently. The script zeroes the gradients first, as most scripts do.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from perfkit.findings import Diagnosis, diagnose
from perfkit.run import RunData, read_run
from tests.test_run_command import perfkit_run

HERE = Path(__file__).parent
TOLERANCE = 0.05
PARTS = ("forward", "backward", "optimizer", "zero_grad")


def run_planted(tmp_path: Path, **plant: float) -> tuple[Diagnosis, RunData, dict[str, float], str]:
    """``perfkit run`` of the script with ``plant`` (part: seconds a step); the diagnosis of its run
    directory, the run, the script's own clock of its last epoch, and what perfkit run printed."""
    args = [f"{part}={seconds}" for part, seconds in plant.items()]
    done = perfkit_run(tmp_path, sys.executable, str(HERE / "autorun_planted_parts.py"), *args)
    assert done.returncode == 0, done.stderr[-3000:]
    mine = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert len(mine) == 2, done.stdout
    run = read_run(tmp_path / "run")
    assert [(w.stage, w.epoch) for w in run.windows] == [("train", 0), ("train", 1)]
    return diagnose(run), run, mine[-1], done.stderr


def share(clock: dict[str, float], part: str) -> float:
    """The part's share of the epoch by the script's own clock."""
    return clock.get(part, 0.0) / clock["wall"]


def noise(clock: dict[str, float]) -> float:
    """What the script's clock saw of its loop bodies outside every piece it timed, over the epoch."""
    return max(0.0, clock["body"] - sum(clock.get(p, 0.0) for p in PARTS)) / clock["wall"]


def written_first(tmp_path: Path) -> Any:
    """The first verdict of the verdicts.json ``perfkit run`` wrote."""
    return json.loads((tmp_path / "run" / "verdicts.json").read_text(encoding="utf-8"))["verdicts"][0]


def test_a_slow_optimizer_step_is_named_first_with_its_share_by_the_scripts_own_clock(
    tmp_path: Path, record_property: Any
) -> None:
    d, _, clock, printed = run_planted(tmp_path, optimizer=0.008)
    v = d.verdicts[0]
    record_property("share", (v.share, share(clock, "optimizer"), noise(clock)))
    assert (v.kind, v.stage, v.epoch) == ("OPTIMIZER_STEP", "train", 1)
    assert abs(v.share - share(clock, "optimizer")) < TOLERANCE + noise(clock), (v.share, clock)
    assert written_first(tmp_path)["kind"] == "OPTIMIZER_STEP"
    assert "TOP: OPTIMIZER_STEP" in printed


def test_a_slow_backward_is_named_first_with_its_share_and_the_forward_after_zero_grad_is_forward(
    tmp_path: Path, record_property: Any
) -> None:
    """The forward (2 ms planted a step) runs after ``zero_grad``: it is the step's forward, so the
    backward's ratio to it is the script's, not a forward of the microseconds before zero_grad."""
    d, run, clock, printed = run_planted(tmp_path, backward=0.008, forward=0.002)
    v = d.verdicts[0]
    window = run.windows[-1].window
    forward = window.account.subjects["step"].get("forward", 0.0) / window.wall_s
    record_property("share", (v.share, share(clock, "backward"), noise(clock)))
    record_property("forward", (forward, share(clock, "forward")))
    assert (v.kind, v.stage, v.epoch) == ("SLOW_BACKWARD", "train", 1)
    assert abs(v.share - share(clock, "backward")) < TOLERANCE + noise(clock), (v.share, clock)
    assert abs(forward - share(clock, "forward")) < TOLERANCE + noise(clock), (forward, clock)
    ratio = clock["backward"] / clock["forward"]  # about 4x
    assert v.evidence["backward_s"] / v.evidence["forward_s"] < 2 * ratio, (v.evidence, clock)
    assert written_first(tmp_path)["kind"] == "SLOW_BACKWARD"
    assert "TOP: SLOW_BACKWARD" in printed
