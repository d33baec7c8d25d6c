"""A rank whose compute is slow, in a real four-process Lightning DDP fit (gloo, CPU): the monitor
times each rank's wait for the gradient all-reduce, and STRAGGLER names rank 3's compute while
every rank's step is as long."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from perfkit.findings import diagnose
from perfkit.run import read_run

from .jobs import run_job

JOB = Path(__file__).with_name("ddp_compute_straggler.py")


@pytest.mark.slow
def test_a_rank_with_slow_compute_is_named_and_the_ranks_waiting_for_it_say_how_long(tmp_path: Path) -> None:
    run_job(JOB, tmp_path, timeout_s=180)
    truth = [json.loads((tmp_path / f"truth_rank{r}.json").read_text()) for r in range(4)]
    run = read_run(tmp_path / "run")
    window = [w for w in run.windows if w.stage == "train"][-1].window
    ranks = {r.rank: r for r in window.ranks}
    steps = [ranks[r].step_mean_s for r in range(4)]
    assert max(steps) - min(steps) < 0.25 * min(steps)  # steps alone name no one
    top = next(v for v in diagnose(run, cores=8).verdicts if v.kind == "STRAGGLER")
    assert top.subject == "rank 3"
    assert "its compute" in top.message
    assert "ranks 0, 1, 2 wait for it in the gradient all-reduce" in top.message
    # rank 3's excess compute is what it planted, by its own clock; the others waited about as long
    planted = truth[3]["planted"][-1]
    compute = [top.evidence[f"rank{r}_compute_s"] for r in range(4)]
    assert compute[3] - sorted(compute[:3])[1] == pytest.approx(planted, rel=0.25)
    for r in range(3):
        assert top.evidence[f"rank{r}_sync_wait_s"] == pytest.approx(planted, rel=0.3)
    assert top.evidence["rank3_sync_wait_s"] < 0.25 * planted


def test_a_ddp_model_with_its_own_comm_hook_keeps_it_and_perfkit_says_so(tmp_path: Path) -> None:
    import torch
    import torch.distributed as dist
    from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook
    from torch.nn.parallel import DistributedDataParallel as DDP

    import perfkit
    from perfkit.monitor import Options, Session

    # what PerfMonitor does as the fit starts: its session times the strategy's DDP model
    session = Session(Options(registry=perfkit.Registry(), console=False, sample_resources=False))
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    try:
        model = DDP(torch.nn.Linear(4, 2))
        model.register_comm_hook(None, allreduce_hook)
        with pytest.warns(perfkit.PerfkitWarning, match="already has a communication hook"):
            session.time_gradient_sync(model)
        session.time_gradient_sync(torch.nn.Linear(4, 2))  # not DDP: nothing to time, nothing said
    finally:
        dist.destroy_process_group()
