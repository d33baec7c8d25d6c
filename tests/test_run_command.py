"""``perfkit run -- COMMAND``: a script timed unchanged, its exit code kept, its verdicts printed.

Each test runs a real command in child processes, as a user would; the scripts measure
their own waits with ``time.perf_counter`` and print them, the test's clock to hold
perfkit's account against.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from perfkit._cli import main
from perfkit.run import read_run

pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[1]

LOADER = """
import json, sys, time
import torch
from torch.utils.data import DataLoader, Dataset

class Slow(Dataset):
    def __len__(self):
        return 40

    def __getitem__(self, i):
        time.sleep(0.004)  # planted: 16 ms per batch of 4
        return torch.ones(4)

loader = DataLoader(Slow(), batch_size=4)

def epoch(body_s, fail_at=None):
    wait, t_start, it = 0.0, time.perf_counter(), iter(loader)
    for i in range(1000):
        t0 = time.perf_counter()
        try:
            batch = next(it)
        except StopIteration:
            wait += time.perf_counter() - t0
            break
        wait += time.perf_counter() - t0
        if i == fail_at:
            raise RuntimeError("planted failure")
        time.sleep(body_s)
    return {"wait": wait, "wall": time.perf_counter() - t_start}
"""


ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
"""This checkout's perfkit, in the command's processes too."""


def perfkit_argv(tmp_path: Path, *command: str) -> list[str]:
    """``python -m perfkit run --run-dir TMP/run -- COMMAND``."""
    return [sys.executable, "-m", "perfkit", "run", "--run-dir", str(tmp_path / "run"), "--", *command]


def perfkit_run(tmp_path: Path, *command: str) -> subprocess.CompletedProcess[str]:
    """``perfkit run`` of ``command`` from ``tmp_path``, bounded in time."""
    argv = perfkit_argv(tmp_path, *command)
    return subprocess.run(argv, cwd=tmp_path, env=ENV, capture_output=True, text=True, timeout=180)


def script(tmp_path: Path, body: str, *, name: str = "train.py") -> str:
    path = tmp_path / name
    path.write_text(LOADER + textwrap.dedent(body), encoding="utf-8")
    return str(path)


def test_the_data_wait_share_matches_the_scripts_own_clock(tmp_path: Path) -> None:
    train = script(
        tmp_path,
        """
        mine = [epoch(0.012) for _ in range(2)]
        with torch.no_grad():
            mine.append(epoch(0.0))
        print(json.dumps(mine))
        """,
    )
    done = perfkit_run(tmp_path, sys.executable, train)
    assert done.returncode == 0, done.stderr
    mine = json.loads(done.stdout.splitlines()[-1])
    run = read_run(tmp_path / "run")
    assert [(w.stage, w.epoch) for w in run.windows] == [("train", 0), ("train", 1), ("val", 0)]
    for own, w in zip(mine, run.windows, strict=True):
        share = w.window.account.parts["data_wait"] / w.wall_s
        assert abs(share - own["wait"] / own["wall"]) < 0.05, (w.stage, share, own)
        assert w.window.snapshot["train.data.wait"].count == 10  # one loader: named after its first stage
    assert run.windows[2].window.loader == "train"
    assert run.windows[0].window.snapshot["train.step"].count == 10
    assert run.windows[0].window.samples == 40
    assert run.final is not None
    assert (tmp_path / "run" / "verdicts.json").exists()
    assert "perfkit summary:" in done.stderr
    assert "INPUT_BOUND" in done.stderr


@pytest.mark.parametrize(("ending", "code"), [("sys.exit(3)", 3), ("raise ValueError('boom')", 1)])
def test_a_failing_script_keeps_its_exit_code_and_its_windows(tmp_path: Path, ending: str, code: int) -> None:
    train = script(
        tmp_path,
        f"""
        epoch(0.0)
        try:
            epoch(0.0, fail_at=3)
        except RuntimeError:
            {ending}
        """,
    )
    done = perfkit_run(tmp_path, sys.executable, train)
    assert done.returncode == code, done.stderr
    run = read_run(tmp_path / "run")
    assert [(w.stage, w.epoch) for w in run.windows] == [("train", 0), ("train", 1)]
    assert run.windows[1].window.snapshot["train.data.wait"].count == 4  # closed at exit, at its 4th batch
    assert run.final is not None
    assert not run.problems
    assert "perfkit summary:" in done.stderr
    said = done.stderr[done.stderr.index("perfkit run: the command failed") :]
    assert said.startswith(f"perfkit run: the command failed (exit {code}): the verdicts below judge only")


def test_a_script_that_crashes_on_its_first_batch_is_said_to_have_failed_and_is_not_judged(
    tmp_path: Path,
) -> None:
    train = script(tmp_path, "epoch(0.0, fail_at=0)\n")
    done = perfkit_run(tmp_path, sys.executable, train)
    assert done.returncode == 1, done.stderr
    said = done.stderr[done.stderr.index("perfkit run: the command failed") :]
    assert said.startswith("perfkit run: the command failed (exit 1)")
    assert "TOP: too little to judge" in said  # no verdict on one-off costs
    assert "Could not judge: every rule (train): no more than 1 step in" in said


def test_ctrl_c_ends_the_script_with_130_and_leaves_its_windows(tmp_path: Path) -> None:
    marker = tmp_path / "epoch0.done"
    train = script(
        tmp_path,
        f"""
        epoch(0.0)
        open({str(marker)!r}, "w").close()
        epoch(1.0)
        """,
    )
    argv = perfkit_argv(tmp_path, sys.executable, train)
    proc = subprocess.Popen(argv, cwd=tmp_path, env=ENV, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not marker.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.2)
    proc.send_signal(signal.SIGINT)  # to perfkit run alone: it passes it on (no terminal here)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    run = read_run(tmp_path / "run")
    assert [(w.stage, w.epoch) for w in run.windows] == [("train", 0), ("train", 1)]
    assert "KeyboardInterrupt" in stderr
    assert "perfkit summary:" in stderr


def test_a_script_without_a_dataloader_says_so(tmp_path: Path) -> None:
    done = perfkit_run(tmp_path, sys.executable, "-c", "import torch; print(torch.ones(2).sum().item())")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "2.0"
    assert "no DataLoader was iterated" in done.stderr
    assert "perfkit.window('train', epoch=epoch)" in done.stderr  # what to write instead
    assert "timed" not in done.stderr.split("no DataLoader")[0]  # nothing of its own to name
    assert not (tmp_path / "run").exists()


OWN_LOOP = """
import numpy as np, perfkit, torch
data = np.arange(64, dtype=np.float32)
def batches():
    for i in range(0, 64, 8):
        yield data[i:i + 8]
for batch in perfkit.timed_iter(batches(), "train"):
    with perfkit.section("forward"):
        batch.sum()
"""


def test_a_loop_of_its_own_timed_by_the_script_is_named_with_how_to_make_it_a_stage(tmp_path: Path) -> None:
    """nanoGPT's shape: batches sliced from an array, timed by the script with timed_iter."""
    done = perfkit_run(tmp_path, sys.executable, "-c", OWN_LOOP)
    assert done.returncode == 0, done.stderr
    assert (
        "the script timed 5 series itself (forward, train.data.end, train.data.iter, train.data.wait, "
        in done.stderr
    )
    assert "wrap its loop in perfkit.window('train', epoch=epoch)" in done.stderr
    assert not (tmp_path / "run").exists()


def test_a_script_named_first_runs_with_this_python(tmp_path: Path) -> None:
    train = script(tmp_path, "epoch(0.0)\nsys.exit(5)\n")
    done = perfkit_run(tmp_path, train)
    assert done.returncode == 5, done.stderr
    assert [w.stage for w in read_run(tmp_path / "run").windows] == ["train"]


DDP = """
import torch.distributed as dist
from torch.utils.data.distributed import DistributedSampler

dist.init_process_group("gloo")
loader = DataLoader(Slow(), batch_size=4, sampler=DistributedSampler(Slow()))
for _ in range(2):
    for batch in loader:
        dist.all_reduce(batch)
dist.barrier()
dist.destroy_process_group()
"""


def test_under_torchrun_rank_0_writes_the_run_directory(tmp_path: Path) -> None:
    train = script(tmp_path, DDP)
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", train]
    done = perfkit_run(tmp_path, *torchrun)
    assert done.returncode == 0, done.stderr
    run = read_run(tmp_path / "run")
    assert run.meta["meta"]["world_size"] == 2
    assert len(run.jobs) == 1  # rank 0 alone
    assert [(w.stage, w.epoch) for w in run.windows] == [("train", 0), ("train", 1)]
    snapshot = run.windows[0].window.snapshot
    assert snapshot["train.step"].count == 5  # 20 samples of 40 on this rank, 4 a batch
    # each step's all-reduce: its wait, in the step (no backward: all of it forward), and its bytes
    assert snapshot["dist.wait.forward.all_reduce"].count == 5
    assert snapshot.gauges["dist.bytes.all_reduce"].count == 5


def test_the_standalone_example_runs_under_it(tmp_path: Path) -> None:
    done = perfkit_run(tmp_path, sys.executable, str(ROOT / "examples" / "standalone.py"))
    assert done.returncode == 0, done.stderr
    run = read_run(tmp_path / "run")
    assert [(w.stage, w.epoch) for w in run.windows] == [("train", 0), ("train", 1)]
    snapshot = run.windows[0].window.snapshot
    assert snapshot["train.data.wait"].count == 8  # its own timed_iter and perfkit run's: counted once
    assert "epoch" in {path[0] for path in snapshot.tree}  # the script's own sections are in the windows


def test_run_without_a_command_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run"]) == 2
    assert main(["run", "--"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["perfkit: error: run needs a command: perfkit run -- python train.py ARGS"] * 2


def test_a_command_that_does_not_exist_exits_127(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--run-dir", str(tmp_path / "run"), "--", "no-such-command-perfkit"]) == 127
    said = capsys.readouterr().err.strip()
    assert said == "perfkit: error: cannot run 'no-such-command-perfkit': command not found"
