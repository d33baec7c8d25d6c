"""``perfkit.trial``: a DataLoader timed alone at each setting, within a budget, the user's loader
left as it was."""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import torch
from torch.utils.data import DataLoader

import perfkit
from perfkit.reports import trial_text
from perfkit.run import RunWriter, TrialResult, read_run
from tests.torch.trial_data import Sleepy, busy_collate, cheap

ROOT = Path(__file__).resolve().parents[2]
CORES = len(os.sched_getaffinity(0))


def own_rate(loader: DataLoader[Any], batches: int) -> float:
    """Batches/s of a plain iteration by this test's own clock, after one batch per worker."""
    it = iter(loader)
    for _ in range(1 + loader.num_workers):
        next(it)
    t0 = time.perf_counter()
    for _ in range(batches):
        next(it)
    rate = batches / (time.perf_counter() - t0)
    del it
    return rate


def test_workers_speed_up_a_sleeping_getitem_as_a_plain_iteration_does() -> None:
    loader = DataLoader(Sleepy(400, 0.004), batch_size=4)  # 16 ms a batch, all of it asleep
    result = perfkit.trial(loader, workers=[0, 2], budget_s=6, batches=12)
    rates = result.rates()
    alone = own_rate(DataLoader(Sleepy(400, 0.004), batch_size=4), 12)
    two = own_rate(DataLoader(Sleepy(400, 0.004), batch_size=4, num_workers=2), 12)
    assert rates[0].batches_per_s == pytest.approx(alone, rel=0.3)
    assert rates[2].batches_per_s == pytest.approx(two, rel=0.3)
    assert rates[2].batches_per_s > 1.5 * rates[0].batches_per_s
    assert result.best is not None
    assert result.best.num_workers == 2
    assert rates[2].worker_uss_mb is None or 0 < rates[2].worker_uss_mb < 500


def test_a_cheap_loader_gets_no_workers_when_none_keep_up_better() -> None:
    result = perfkit.trial(cheap(), workers=[0, 1], need_batches_per_s=200, budget_s=5, batches=20)
    assert result.best is not None
    assert result.best.num_workers == 0
    assert result.keeps_up is True
    assert "smallest setting that keeps up" in trial_text(result)


@pytest.mark.filterwarnings("ignore:This DataLoader will create")
def test_a_cpu_bound_collate_is_not_claimed_faster_than_the_cores_allow() -> None:
    items: Any = list(range(2000))
    loader = DataLoader(items, batch_size=4, collate_fn=busy_collate)  # 8 ms of CPU a batch
    result = perfkit.trial(loader, workers=[0, CORES, 2 * CORES], budget_s=6, batches=15)
    rates = result.rates()
    for k, row in rates.items():
        assert row.batches_per_s <= 1.2 * max(1, min(k, CORES)) * rates[0].batches_per_s, row
        assert row.cpu_cores is None or row.cpu_cores <= CORES + 0.5, row


@pytest.mark.parametrize("context", [m for m in ("fork", "spawn") if m in mp.get_all_start_methods()])
def test_workers_start_in_the_loaders_own_context(context: str) -> None:
    loader = DataLoader(Sleepy(80, 0.002), batch_size=4, num_workers=1, multiprocessing_context=context)
    result = perfkit.trial(loader, workers=[1], budget_s=8, batches=5)
    assert result.skipped == () or all("budget" in s for s in result.skipped)
    assert result.settings[0].num_workers == 1
    assert result.settings[0].batches_per_s > 0


def test_the_trial_ends_within_its_budget_and_one_settings_start() -> None:
    loader = DataLoader(Sleepy(2000, 0.02), batch_size=2)  # 40 ms a batch: 30 batches would take 1.2 s
    t0 = time.perf_counter()
    result = perfkit.trial(loader, workers=[0, 1, 2], budget_s=1.0, batches=30)
    took = time.perf_counter() - t0
    assert took < 1.0 + 1.0  # one setting's slack: its workers' start and first batch
    assert result.elapsed_s <= took
    assert all(row.batches < 30 for row in result.settings)


def test_the_users_loader_and_its_random_order_are_left_as_they_were() -> None:
    def make() -> DataLoader[Any]:
        g = torch.Generator().manual_seed(3)
        items: Any = list(range(40))
        return DataLoader(items, batch_size=4, shuffle=True, generator=g)

    loader, twin = make(), make()
    settings = (loader.num_workers, loader.collate_fn, loader.sampler, loader.generator)
    torch.manual_seed(0)
    perfkit.trial(loader, workers=[0], budget_s=2)
    assert (loader.num_workers, loader.collate_fn, loader.sampler, loader.generator) == settings
    assert [b.tolist() for b in loader] == [b.tolist() for b in twin]
    assert torch.initial_seed() == 0


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [({"budget_s": 0}, "budget_s"), ({"batches": 0}, "batches"), ({"need_batches_per_s": -1.0}, "need")],
)
def test_bad_arguments_fail_at_once_naming_the_parameter(kwargs: dict[str, Any], named: str) -> None:
    with pytest.raises(ValueError, match=named):
        perfkit.trial(cheap(), **kwargs)


def test_a_loader_that_is_not_a_dataloader_is_refused() -> None:
    with pytest.raises(TypeError, match="loader must be a torch.utils.data.DataLoader"):
        perfkit.trial([1, 2, 3])  # type: ignore[arg-type]


def test_the_result_goes_into_the_run_directory_and_reads_back(tmp_path: Path) -> None:
    writer = RunWriter(tmp_path / "run")
    result = perfkit.trial(cheap(), workers=[0], budget_s=2, run=writer)
    assert read_run(tmp_path / "run").trials == (result,)
    assert TrialResult.from_dict(json.loads(json.dumps(result.to_dict()))) == result


def test_the_text_says_it_ran_without_the_model_and_what_the_model_changes() -> None:
    text = trial_text(perfkit.trial(cheap(), workers=[0], budget_s=2))
    assert "without the model" in text
    assert "torch thread" in text
    assert f"{CORES} core" in text


def test_a_datamodule_gives_its_train_or_val_loader_after_setup() -> None:
    from perfkit.torch import load_loader

    assert load_loader("tests.torch.trial_datamodule:Data").batch_size == 8
    assert load_loader("tests.torch.trial_datamodule:Data", "val").batch_size == 6


def perfkit_cli(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    command = [sys.executable, "-m", "perfkit", "trial", *args]
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=60)


def test_the_command_line_times_a_factorys_loader_as_json() -> None:
    done = perfkit_cli("tests.torch.trial_data:sleepy", "--budget-s", "4", "--need", "50", "--json")
    assert done.returncode == 0, done.stderr
    result = TrialResult.from_dict(json.loads(done.stdout))
    assert result.need_batches_per_s == 50
    assert result.best is not None
    assert {row.num_workers for row in result.settings} >= {0}


@pytest.mark.parametrize(
    ("factory", "said"),
    [
        ("tests.torch.trial_data:not_a_loader", "not a torch DataLoader"),
        ("no_such_module:make", "cannot import"),
    ],
)
def test_the_command_line_refuses_what_is_not_a_loader_in_one_line(factory: str, said: str) -> None:
    done = perfkit_cli(factory)
    assert done.returncode == 2
    assert said in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
