"""The merged account of many ranks, where most are known by their rows alone (above ``exact_max``):
its parts are every rank's mean; its subjects the mean of the ranks whose details travelled, not
diluted by the others' empty ones; the first batch's extra survives the row."""

from __future__ import annotations

import numpy as np
import pytest

import perfkit
from perfkit.stages import RankResult, StageRecorder
from perfkit.stages._merge import _from_row, _pack, mean_account
from tests.conftest import FakeClock


def one_rank(rank: int, callback_s: float) -> RankResult:
    """A rank's real result, from the recorder on a fake clock: 10 steps of 10 ms after 2 ms
    waits, a callback's hook of ``callback_s`` in all."""
    clock = FakeClock()
    reg = perfkit.Registry(clock=clock)
    captured: list[RankResult] = []

    def capture(r: RankResult) -> list[RankResult]:
        captured.append(r)
        return [r]

    def spend(seconds: float) -> tuple[int, int]:
        t0 = clock.now
        clock.advance(round(seconds * 1e9))
        return t0, clock.now

    rec = StageRecorder(reg, gather=capture, rank=rank)
    rec.begin("train", 0)
    for _ in range(10):
        rec.record("train", "train.data.wait", *spend(0.002))
        rec.hook("Ckpt", *spend(callback_s / 10))
        rec.step_begin("train")
        spend(0.010)
        rec.step_end("train")
    rec.end("train")
    return captured[0]


def test_a_row_carries_the_parts_overlays_and_first_batch_extra() -> None:
    mine = one_rank(5, 0.05)
    assert mine.snapshot is not None
    keys = sorted(f"S:{name}" for name in mine.snapshot)
    *_, row = _pack(mine, keys)
    back = _from_row(5, row)
    assert back.detailed is False
    assert back.account.parts == pytest.approx(dict(mine.account.parts))
    assert back.account.first_batch_extra_s == pytest.approx(mine.account.first_batch_extra_s)
    assert (back.steps, back.wall_s) == (mine.steps, pytest.approx(mine.wall_s))


def test_row_only_ranks_leave_the_subjects_to_the_detailed_ones() -> None:
    detailed = [one_rank(r, 0.05) for r in range(3)]  # 50 ms of callbacks each
    row = _pack(detailed[0], sorted(f"S:{n}" for n in detailed[0].snapshot or ()))[3]
    rows = [_from_row(r, row) for r in range(3, 16)]  # 13 more ranks, alike, known by their rows
    merged = mean_account([*detailed, *rows])
    callbacks = merged.subjects["callbacks"]["Ckpt"]
    assert callbacks == pytest.approx(0.05, rel=0.01)  # not 3/16 of it
    assert merged.seconds("callbacks") == pytest.approx(0.05, rel=0.01)  # every rank's mean part
    assert merged.first_batch_extra_s is not None
    assert np.isfinite(merged.first_batch_extra_s)
