"""time_gradient_sync under real DDP: four CPU processes over gloo, rank 3's forward 40 ms slower a step.

Every rank's step is as long (the others wait for rank 3 inside backward, in the gradient
all-reduce), so steps alone name no one; the waits the hook measures do. What perfkit says is
checked against each rank's own clock around its steps, forwards and backwards.
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

from perfkit.findings import diagnose
from perfkit.run import read_run
from perfkit.stages import communication

HERE = Path(__file__).resolve().parent
JOB = HERE / "gradsync_job.py"
WORLD = 4
SLOW = 3
PLANTED_S = 0.04
LAUNCHER_VARS = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_")
PLAIN_ENV = {k: v for k, v in os.environ.items() if not k.startswith(LAUNCHER_VARS)}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[int, Any]]:
    out = tmp_path_factory.mktemp("gradsync")
    port = str(free_port())
    procs = [
        subprocess.Popen(
            [sys.executable, str(JOB), str(r), str(WORLD), port, str(out / "run")],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=PLAIN_ENV,
            cwd=out,
        )
        for r in range(WORLD)
    ]
    own = {}
    for p in procs:
        stdout, stderr = p.communicate(timeout=120)
        assert p.returncode == 0, stderr[-3000:]
        line = json.loads(next(x for x in stdout.splitlines() if x.startswith('{"rank"')))
        own[line["rank"]] = line
    return out / "run", own


@pytest.mark.slow
def test_the_timed_all_reduce_gives_ddps_own_result_bit_for_bit(job: tuple[Path, dict[int, Any]]) -> None:
    _, own = job
    assert all(own[r]["same_as_ddp"] for r in range(WORLD))


@pytest.mark.slow
def test_every_ranks_step_is_as_long_by_its_own_clock_while_rank_3s_forward_is_slow(
    job: tuple[Path, dict[int, Any]],
) -> None:
    _, own = job
    last = {r: own[r]["epochs"][-1] for r in range(WORLD)}
    steps = [statistics.median(last[r]["step"]) for r in range(WORLD)]
    forwards = [statistics.median(last[r]["forward"]) for r in range(WORLD)]
    assert max(steps) - min(steps) < 0.25 * PLANTED_S  # what STRAGGLER cannot see in the steps
    assert forwards[SLOW] - max(f for r, f in enumerate(forwards) if r != SLOW) > 0.9 * PLANTED_S


@pytest.mark.slow
def test_straggler_names_rank_3_its_compute_and_how_long_each_other_rank_waits(
    job: tuple[Path, dict[int, Any]],
) -> None:
    run_dir, own = job
    run = read_run(run_dir)
    d = diagnose(run, cores=8)
    top = next(v for v in d.verdicts if v.kind == "STRAGGLER")
    assert top.subject == f"rank {SLOW}"
    assert "its compute" in top.message
    assert "not its data" in top.message
    assert "ranks 0, 1, 2 wait for it in the gradient all-reduce" in top.message
    assert top.part == "step"  # compute is a piece of the account's step
    window = [w for w in run.windows if w.stage == "train"][-1].window
    ranks = {r.rank: r for r in window.ranks}
    for r in range(WORLD):
        clock = own[r]["epochs"][-1]
        steps = len(clock["step"])
        wait = ranks[r].account.overlays["sync_wait"]
        assert top.evidence[f"rank{r}_sync_wait_s"] == pytest.approx(wait)
        if r == SLOW:  # the rank everyone waits for waits least
            assert wait / steps < 0.25 * PLANTED_S
            continue
        # each waits at least rank 3's planted time, and what its own clock saw its backward held
        # past its last gradient
        held = sum(clock["held"])
        assert wait / steps > 0.75 * PLANTED_S
        assert wait == pytest.approx(held, rel=0.1)
    # rank 3's excess compute is its forward's extra time, by its own clock
    forwards = {r: sum(own[r]["epochs"][-1]["forward"]) for r in range(WORLD)}
    extra = forwards[SLOW] - statistics.median(forwards[r] for r in range(WORLD) if r != SLOW)
    compute = {r: top.evidence[f"rank{r}_compute_s"] for r in range(WORLD)}
    excess = compute[SLOW] - statistics.median(compute[r] for r in range(WORLD) if r != SLOW)
    assert excess == pytest.approx(extra, rel=0.25)


@pytest.mark.slow
def test_communication_reads_ddps_wait_as_backwards_all_reduce_counted_once(
    job: tuple[Path, dict[int, Any]],
) -> None:
    """DDP's gradient sync and the timing of every other collective agree: the hook's all-reduce is
    one all-reduce in backward, its wait ``sync_wait``'s, its bytes the gradients'."""
    run_dir, _ = job
    window = [w for w in read_run(run_dir).windows if w.stage == "train"][-1].window
    c = communication(window)
    assert c is not None
    waits = [r.account.overlays["sync_wait"] for r in window.ranks]
    assert dict(c.by_collective) == {"all_reduce": pytest.approx(statistics.fmean(waits))}
    assert dict(c.by_part) == {"backward": pytest.approx(statistics.fmean(waits))}
    assert c.rank_wait_s == pytest.approx(waits)
    assert "collective_wait" not in window.account.overlays  # the hook's own all-reduce is not timed again
    gradients = (32 * 64 + 64 + 64 * 2 + 2) * 4  # the model's parameters, in fp32
    assert c.bytes_per_step == {"all_reduce": pytest.approx(gradients)}


def test_one_record_per_step_a_second_call_is_a_no_op_and_a_users_own_hook_is_refused(tmp_path: Path) -> None:
    """In one process (a world of one over gloo): DDP takes a single communication hook."""
    import torch
    import torch.distributed as dist
    from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook
    from torch.nn.parallel import DistributedDataParallel as DDP

    import perfkit
    import perfkit.torch

    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    try:
        reg = perfkit.Registry()
        model = DDP(torch.nn.Linear(4, 2))
        assert perfkit.torch.time_gradient_sync(model, registry=reg) is True
        assert perfkit.torch.time_gradient_sync(model, registry=reg) is False  # already timed: left alone
        for _ in range(3):
            model(torch.randn(8, 4)).sum().backward()
        assert reg.snapshot()["dist.grad_wait"].count == 3
        theirs = DDP(torch.nn.Linear(4, 2))
        theirs.register_comm_hook(None, allreduce_hook)
        with pytest.raises(RuntimeError):
            perfkit.torch.time_gradient_sync(theirs, registry=reg)
    finally:
        dist.destroy_process_group()
