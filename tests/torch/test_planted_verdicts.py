"""Planted causes one level below the account, in plain loops (``perfkit.window`` over a torch
DataLoader): the first verdict names the planted part, with its share within 5 points of the
test's own clock (plus the noise that clock measured in the same run); where the verdict states a
gain, following its change saves at least half of it, judged against the noise of interleaved runs
(``tests/paired.py``).

Plants: a slow optimizer step, a slow backward (a custom autograd Function), a slow sampler (in the
main process), batches of many small tensors through the workers' queue, one slow worker of three.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
import torch
from torch.utils.data import DataLoader, Dataset, Sampler, get_worker_info

import perfkit
import perfkit.torch
from perfkit.findings import Verdict, diagnose_windows
from perfkit.stages import StageWindow
from tests.paired import paired
from tests.planted_parts import TRUTH, SlowBackward, SlowSGD, sleep

TOLERANCE = 0.05


def loop(
    loader: DataLoader[Any], *, epochs: int = 2, backward_s: float = 0.0, optimizer_s: float = 0.0
) -> tuple[list[StageWindow], list[float]]:
    """``epochs`` epochs of a tiny model over ``loader``, each in ``perfkit.window``; each epoch's
    seconds by the test's clock."""
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 1)
    opt = SlowSGD(model.parameters(), lr=0.01, step_s=optimizer_s)
    reg = perfkit.Registry()
    windows, seconds = [], []
    with perfkit.use_registry(reg):
        perfkit.torch.instrument(loader, "train", registry=reg)
        for epoch in range(epochs):
            TRUTH.reset()
            t0 = time.perf_counter()
            with perfkit.window("train", epoch=epoch, registry=reg, console=False) as w:
                for x in w.iterate(loader):
                    batch = x if isinstance(x, torch.Tensor) else torch.stack(x[:4])
                    loss = SlowBackward.apply(model(batch.reshape(-1, 8)), backward_s).mean()
                    opt.zero_grad()
                    with TRUTH.part("backward"):
                        loss.backward()
                    opt.step()
            seconds.append(time.perf_counter() - t0)
            assert w.window is not None
            windows.append(w.window)
    return windows, seconds


def within(v: Verdict, window: StageWindow, truth_s: float) -> bool:
    """The verdict's seconds against the test's, as shares of the epoch perfkit timed (the test's
    clock around the window also holds perfkit's own publishing at its end, which is no epoch's)."""
    return abs(v.share - truth_s / window.wall_s) < TOLERANCE


def first(windows: list[StageWindow]) -> Verdict:
    return diagnose_windows(windows, cores=2).verdicts[0]


class Rows(Dataset[torch.Tensor]):
    def __init__(self, n: int = 64, sleep_s: float = 0.0, slow_worker: int | None = None) -> None:
        self.n, self.sleep_s, self.slow_worker = n, sleep_s, slow_worker

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> torch.Tensor:
        info = get_worker_info()
        if info is not None and info.id == self.slow_worker:
            time.sleep(self.sleep_s * 4)
        elif self.sleep_s:
            time.sleep(self.sleep_s)
        return torch.ones(8)


def test_a_slow_optimizer_step_is_named_first_with_its_share() -> None:
    windows, _ = loop(DataLoader(Rows(), batch_size=4), optimizer_s=0.008)
    v = first(windows)
    assert v.kind == "OPTIMIZER_STEP"
    assert within(v, windows[-1], TRUTH.seconds["optimizer"])
    assert "mixed precision or torch.compile of the model do not touch it" in v.action


def test_a_slow_backward_is_named_first_with_its_share() -> None:
    windows, _ = loop(DataLoader(Rows(), batch_size=4), backward_s=0.008)
    v = first(windows)
    assert v.kind == "SLOW_BACKWARD"
    assert within(v, windows[-1], TRUTH.seconds["backward"])


class SlowSampler(Sampler[int]):
    """Draws each index with a planted cost (a weighted draw over a large table, say); its own time
    goes to ``TRUTH``. ``precomputed``: the same order, drawn up front in ``__iter__`` (the advice)."""

    def __init__(self, n: int, per_index_s: float, *, precomputed: bool = False) -> None:
        self.n, self.per_index_s, self.precomputed = n, per_index_s, precomputed

    def __len__(self) -> int:
        return self.n

    def __iter__(self) -> Iterator[int]:
        if self.precomputed:
            return iter(list(range(self.n)))
        return self._draw()

    def _draw(self) -> Iterator[int]:
        for i in range(self.n):
            with TRUTH.part("sampler"):
                sleep(self.per_index_s)
            yield i


def sampler_loader(precomputed: bool) -> DataLoader[Any]:
    sampler = SlowSampler(64, 0.0015, precomputed=precomputed)
    return DataLoader(Rows(), batch_size=4, sampler=sampler, num_workers=2, persistent_workers=True)


def test_a_slow_sampler_is_named_first_and_its_fix_saves_what_it_said() -> None:
    windows, seconds = loop(sampler_loader(False))
    v = first(windows)
    assert v.kind == "SLOW_SAMPLER"
    assert within(v, windows[-1], TRUTH.seconds["sampler"])
    assert v.gain is not None
    timed = paired(
        lambda: loop(sampler_loader(False))[1][-1],
        lambda: loop(sampler_loader(True))[1][-1],
        seconds[-1],
    )
    assert timed.saving >= 0.5 * v.gain[0] - timed.noise, (v.gain, timed)


class ManyTensors(Dataset[list[torch.Tensor]]):
    """Each sample a list of 100 small tensors: each travels through the workers' queue on its own
    (a file descriptor in shared memory each), so rebuilding a batch costs far more than making it."""

    def __len__(self) -> int:
        return 32

    def __getitem__(self, i: int) -> list[torch.Tensor]:
        return [torch.ones(8) for _ in range(100)]


def flat(items: list[list[torch.Tensor]]) -> list[torch.Tensor]:
    return [t for item in items for t in item]


def test_batches_of_many_small_tensors_are_named_as_their_transfer() -> None:
    loader = DataLoader(ManyTensors(), batch_size=4, num_workers=2, persistent_workers=True, collate_fn=flat)
    windows, _ = loop(loader)
    v = first(windows)
    assert v.kind == "BATCH_TRANSFER"
    parts = windows[-1].account.subjects["wait_parts"]
    assert parts["receive"] > parts.get("worker", 0.0)  # the rebuilding, not the making


def test_one_slow_worker_of_three_is_named_with_its_io() -> None:
    loader = DataLoader(
        Rows(96, sleep_s=0.002, slow_worker=2), batch_size=4, num_workers=3, persistent_workers=True
    )
    windows, _ = loop(loader)
    v = first(windows)
    assert (v.kind, v.subject) == ("SLOW_WORKER", "worker 2")
    assert v.evidence["worker_cpu_fraction"] < 0.5  # its batches sleep: waiting, not computing


@pytest.fixture(autouse=True)
def _one_thread() -> Iterator[None]:
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
