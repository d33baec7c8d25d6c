"""``perfkit run`` gives the worker advice the callbacks give, on the shapes a user's script has: a
loader whose items sleep (a disk, a network) at 0, 2 and 4 workers gets the count that keeps up
with its gain, past twice the cores where the waiting workers need so few of them, and never the
words "made by computing" for a batch that is 1% CPU; a loader whose items compute, with 2 workers
on the cores, is told the cores are the limit. The scripts run unchanged in child processes, as a
user runs them; the verdicts are read from the run directory ``perfkit run`` wrote."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from perfkit.findings import diagnose
from perfkit.run import read_run
from tests.test_run_command import perfkit_run

pytest.importorskip("torch")

SCRIPT = """
import sys, time
import torch
from torch.utils.data import DataLoader, Dataset

WORKERS, KIND = int(sys.argv[1]), sys.argv[2]

class Items(Dataset):
    def __len__(self):
        return 48

    def __getitem__(self, i):
        if KIND == "sleep":
            time.sleep(0.02)  # planted: a disk, 80 ms a batch of 4
        else:
            end = time.thread_time() + 0.02  # planted: 80 ms of computing a batch of 4
            while time.thread_time() < end:
                pass
        return torch.ones(8)

model = torch.nn.Linear(8, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(Items(), batch_size=4, num_workers=WORKERS, persistent_workers=WORKERS > 0)
for epoch in range(2):
    for batch in loader:
        opt.zero_grad()
        model(batch).sum().backward()
        opt.step()
        time.sleep(0.01)  # the rest of the step: 10 ms of loop a batch
"""


def advice(tmp_path: Path, workers: int, kind: str) -> tuple[str, dict[str, object], str]:
    """``perfkit run`` of the script: INPUT_BOUND's change, and its action in words."""
    path = tmp_path / "train.py"
    path.write_text(textwrap.dedent(SCRIPT), encoding="utf-8")
    done = perfkit_run(tmp_path, sys.executable, str(path), str(workers), kind)
    assert done.returncode == 0, done.stderr[-3000:]
    verdicts = [v for v in diagnose(read_run(tmp_path / "run")).verdicts if v.kind == "INPUT_BOUND"]
    assert verdicts, done.stdout[-3000:]
    v = verdicts[0]
    return v.action, dict(v.change), done.stdout + done.stderr


@pytest.mark.parametrize("workers", [0, 2, 4])
def test_a_loader_that_sleeps_gets_the_workers_that_keep_up_with_a_gain(tmp_path: Path, workers: int) -> None:
    action, change, printed = advice(tmp_path, workers, "sleep")
    # 80 ms a batch against about 10 ms of loop: 8 workers keep up (a 1%-CPU worker takes a tenth
    # of a core at most: 8 fit beside the model on 2 cores, past the twice-the-cores cap of before)
    assert 7 <= int(str(change["num_workers"])) <= 9, action
    assert "expected gain" in action
    assert "made by computing" not in action
    assert "num_workers=" in printed


def test_a_loader_that_computes_on_every_core_is_told_the_cores_are_the_limit(tmp_path: Path) -> None:
    action, change, _ = advice(tmp_path, 2, "compute")
    assert int(str(change.get("num_workers", 2))) <= 2, action
    assert "the cores, not the worker count, are the limit" in action
