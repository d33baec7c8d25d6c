"""perfkit's account of FSDP2 jobs beside each job's own clock: the figures of docs/distributed.md.

    python benchmarks/fsdp_truth.py [--modes straggler heavy balanced]

Runs tests/torch/fsdp_job.py (CPU, gloo, ``fully_shard`` per layer; the job clocks every collective
and ``Work.wait`` itself) in each mode -- ``straggler`` on 4 processes (rank 1's forward 30 ms slower
a step), ``heavy`` and ``balanced`` on 2 -- and prints, per epoch after the first, each rank's
exposed communication share by perfkit and by the job's clock, and where ``straggler_parts`` puts
the slow rank (its excess per step by perfkit, and by the job's clock: its forward less its waits,
against the others' median).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from perfkit.run import read_run
from perfkit.stages import communication, straggler_parts

ROOT = Path(__file__).resolve().parents[1]
JOB = ROOT / "tests" / "torch" / "fsdp_job.py"
WORLD = {"straggler": 4, "heavy": 2, "balanced": 2}


def run(mode: str, out: Path) -> dict[int, Any]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = str(s.getsockname()[1])
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RANK", "WORLD_SIZE", "MASTER_"))}
    env |= {"PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    procs = [
        subprocess.Popen(
            [sys.executable, str(JOB), str(r), str(WORLD[mode]), port, str(out), mode],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env=env,
        )
        for r in range(WORLD[mode])
    ]
    clocks = {}
    for p in procs:
        line = json.loads(
            next(x for x in p.communicate(timeout=300)[0].splitlines() if x.startswith('{"rank"'))
        )
        clocks[line["rank"]] = line["epochs"]
    return clocks


def own_forward(clock: dict[str, Any]) -> float:
    waits = sum(s for k, s in clock["waits"].items() if k.startswith("forward."))
    return float(clock["phases"]["forward"]) - waits


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--modes", nargs="+", default=list(WORLD))
    args = parser.parse_args()
    for mode in args.modes:
        with tempfile.TemporaryDirectory() as tmp:
            clocks = run(mode, Path(tmp) / "run")
            windows = [w.window for w in read_run(Path(tmp) / "run").windows][1:]
        print(f"{mode} ({WORLD[mode]} ranks)")
        for window in windows:
            c = communication(window)
            assert c is not None
            shares = []
            for i, r in enumerate(window.ranks):
                clock = clocks[r.rank][window.epoch]
                truth = sum(clock["waits"].values()) / clock["wall_s"]
                shares.append(f"rank {r.rank} {c.rank_wait_s[i] / r.wall_s:.1%} (clock {truth:.1%})")
            print(f"  epoch {window.epoch}: communication {', '.join(shares)}")
            found = straggler_parts(window)
            if found is None:
                continue
            mine = {r: own_forward(clocks[r][window.epoch]) for r in clocks}
            truth = mine[found.rank] - statistics.median(v for r, v in mine.items() if r != found.rank)
            excess = {
                k: f"{v / found.steps * 1e3:.1f}" for k, v in found.excess_s.items() if k != "zero_grad"
            }
            waits = {k: f"{v / found.steps * 1e3:.1f}" for k, v in found.others_wait_s.items()}
            print(
                f"    slowest rank {found.rank}, in {found.part}: excess ms/step {excess} "
                f"(forward by the clock {truth / found.steps * 1e3:.1f}); the others' waits ms/step {waits}"
            )


if __name__ == "__main__":
    main()
