"""Where users run FSDP2: a ``torchrun`` script with ``perfkit.window(..., gather=gather_ranks)``, and
``perfkit run -- torchrun`` around the same loop with no perfkit call in it (rank 0 records there).
Each path gives rank 0 the account its own clock saw (tests/torch/fsdp_job.py, the communication-heavy
model): its waits' share of the epoch within 5 points, in the same step parts and collectives, the
bytes and calls per step exactly the job's. examples/fsdp_loop.py, the recipe of docs/distributed.md,
runs as its docstring says.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from perfkit.run import read_run
from perfkit.stages import Account, communication, straggler_parts

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
LAUNCHER_VARS = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_", "TORCHELASTIC")
ENV = {k: v for k, v in os.environ.items() if not k.startswith(LAUNCHER_VARS)} | {
    "PYTHONPATH": str(ROOT),
    "OMP_NUM_THREADS": "1",
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def torchrun(*args: str) -> list[str]:
    port = str(free_port())
    return [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc_per_node",
        "2",
        "--master_port",
        port,
        *args,
    ]


def run(argv: list[str], cwd: Path) -> str:
    done = subprocess.run(argv, cwd=cwd, env=ENV, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def rank0(run_dir: Path) -> list[tuple[int, Account, float]]:
    """Rank 0's account and wall time of each train epoch but the first (its start-up)."""
    out = []
    for line in read_run(run_dir).windows[1:]:
        w = line.window
        mine = next((r for r in w.ranks if r.rank == 0), None)
        out.append((w.epoch, w.account, w.wall_s) if mine is None else (w.epoch, mine.account, mine.wall_s))
    return out


@pytest.mark.slow
@pytest.mark.parametrize("path", ["window", "perfkit run"])
def test_each_path_gives_rank_0_the_account_its_own_clock_saw(tmp_path: Path, path: str) -> None:
    job = [str(HERE / "fsdp_job.py"), "torchrun", str(tmp_path / "run"), "heavy"]
    if path == "window":
        stdout = run(torchrun(*job), tmp_path)
    else:
        auto = [sys.executable, "-m", "perfkit", "run", "--run-dir", str(tmp_path / "run"), "--"]
        stdout = run([*auto, *torchrun(*job, "plain")], tmp_path)
    clocks = [json.loads(x) for x in stdout.splitlines() if x.startswith('{"rank"')]
    own: dict[str, Any] = next(c for c in clocks if c["rank"] == 0)
    for epoch, account, wall in rank0(tmp_path / "run"):
        clock = own["epochs"][epoch]
        truth = sum(clock["waits"].values()) / float(clock["wall_s"])
        bound = max(0.05, abs(wall - float(clock["wall_s"])) / float(clock["wall_s"]))
        assert account.overlays["collective_wait"] / wall == pytest.approx(truth, abs=bound)
        subjects = account.subjects
        assert set(subjects["collective_wait"]) == {k.split(".")[0] for k in clock["waits"]}
        assert set(subjects["collectives"]) == {k.split(".")[1] for k in clock["waits"]}
        assert subjects["collective_bytes"] == clock["bytes"]
        assert subjects["collective_calls"] == clock["calls"]


@pytest.mark.slow
def test_the_example_prints_each_epochs_communication_and_where_the_slow_rank_is(tmp_path: Path) -> None:
    example = [str(ROOT / "examples" / "fsdp_loop.py"), str(tmp_path / "run"), "--slow-rank", "1"]
    stdout = run(torchrun(*example, "--width", "256", "--batch", "16", "--epochs", "2"), tmp_path)
    lines = [x for x in stdout.splitlines() if x.startswith("epoch ")]
    assert len(lines) == 2
    assert "rank 1 computes" in lines[-1]
    assert lines[-1].endswith("more in forward")
    window = read_run(tmp_path / "run").windows[-1].window
    assert communication(window) is not None
    found = straggler_parts(window)
    assert found is not None
    assert (found.rank, found.part) == (1, "forward")
