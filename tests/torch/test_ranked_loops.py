"""The plain-script recipe under two processes: a loop around accelerate's ``prepare`` and a Lightning
Fabric loop (``devices=2``, DDP over gloo on CPU) each get one window per epoch, merged over the
ranks, with each rank's data wait as the rank's own clock saw it; only rank 0 writes the run."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from perfkit.run import read_run

HERE = Path(__file__).resolve().parent
JOB = HERE / "ranked_job.py"
LAUNCHER_VARS = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_")
PLAIN_ENV = {k: v for k, v in os.environ.items() if not k.startswith(LAUNCHER_VARS)}


def launch(command: list[str], cwd: Path) -> dict[int, list[list[float]]]:
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, env=PLAIN_ENV, cwd=cwd)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [json.loads(x) for x in done.stdout.splitlines() if x.startswith('{"rank"')]
    return {line["rank"]: line["epochs"] for line in lines}


def check_merged(out: Path, own: dict[int, list[list[float]]]) -> None:
    assert sorted(own) == [0, 1]
    run = read_run(out)
    assert len(run.jobs) == 1  # rank 0's: rank 1 recorded and gathered, and wrote nothing
    windows = [w for w in run.windows if w.stage == "train"]
    assert [w.epoch for w in windows] == [0, 1]
    for line in windows:
        assert line.metric("steps") == 16  # 8 batches on each rank
        ranks = {r.rank: r for r in line.window.ranks}
        assert sorted(ranks) == [0, 1]
        for rank, epochs in own.items():
            wall_s, waited_s = epochs[line.epoch]
            account = ranks[rank].account
            share = account.seconds("data_wait") / account.wall_s
            assert share == pytest.approx(waited_s / wall_s, abs=0.05), (rank, line.epoch)
    # rank 1's loader is 4x slower: its share is the larger, rank 0 waits for it inside backward
    last = {r.rank: r.account for r in windows[-1].window.ranks}
    assert last[1].seconds("data_wait") > 2 * last[0].seconds("data_wait")


@pytest.mark.slow
def test_a_loop_around_accelerate_prepare_is_merged_over_two_processes(tmp_path: Path) -> None:
    launcher = shutil.which("accelerate", path=str(Path(sys.executable).parent)) or "accelerate"
    two = ["--multi_gpu", "--num_processes", "2", "--num_machines", "1"]  # gloo: Accelerator(cpu=True)
    plain = ["--mixed_precision", "no", "--dynamo_backend", "no"]
    own = launch([launcher, "launch", *two, *plain, str(JOB), "accelerate", str(tmp_path / "run")], tmp_path)
    check_merged(tmp_path / "run", own)


@pytest.mark.slow
def test_a_lightning_fabric_loop_is_merged_over_two_processes(tmp_path: Path) -> None:
    own = launch([sys.executable, str(JOB), "fabric", str(tmp_path / "run")], tmp_path)
    check_merged(tmp_path / "run", own)
