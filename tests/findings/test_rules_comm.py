"""COMMUNICATION_BOUND, and STRAGGLER located inside the step, on ranks recorded as
``perfkit.torch.time_collectives`` records them (real ``StageRecorder``s on fake clocks: each
rank's forward, its wait in the next layer's all-gather, backward and its reduce-scatter, the
optimizer; ``tests/stages/test_comm.py``), so every share is the planted seconds."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.findings.test_rules import Epoch, case, epoch, fires, judged
from tests.stages.test_comm import one_rank, window_of

__all__ = ["epoch"]  # the fixture, used by name
Make = Callable[[str], Epoch]


def test_communication_bound_fires_with_the_exposed_wait_and_where_it_is() -> None:
    """Each step: 4 ms forward, 4 ms held in the all-gather, 3 ms backward, 2 ms in the
    reduce-scatter, 1 ms optimizer; one 0.5 ms all-reduce after the last step."""
    window = window_of([one_rank(r, gather_s=0.004) for r in range(2)])
    v = fires("COMMUNICATION_BOUND", case(window))
    assert v.share == pytest.approx((10 * 0.006 + 0.0005) / (10 * 0.014 + 0.0005))
    assert v.subject == "all_gather"
    assert "all_gather 28%; the waits mostly in forward" in v.message  # 40 ms of 140.5
    assert "(4.0 MB a step in 1 call)" in v.message
    assert "reshard_after_forward=False" in v.action


def test_communication_bound_is_silent_below_a_tenth_of_the_epoch() -> None:
    window = window_of([one_rank(r, gather_s=0.0002, scatter_s=0.0002) for r in range(2)])
    assert judged("COMMUNICATION_BOUND", case(window)) == []


def test_communication_bound_says_nothing_where_no_collective_was_timed(epoch: Make) -> None:
    assert judged("COMMUNICATION_BOUND", case(epoch("train").steps(*[90] * 10).window())) == []


def slow_forward() -> list:  # type: ignore[type-arg]
    """Rank 1's forward takes 20 ms where rank 0's takes 4: rank 0 waits 17 ms a step in the
    all-gather that follows (rank 1: 1 ms), both 2 ms in the reduce-scatter."""
    return [one_rank(0, forward_s=0.004, gather_s=0.017), one_rank(1, forward_s=0.020, gather_s=0.001)]


def test_a_slow_ranks_wait_is_the_stragglers_not_communications() -> None:
    window = window_of(slow_forward())
    waits = (10 * 0.019 + 0.0005 + 10 * 0.003 + 0.0005) / 2  # the ranks' mean
    explained = 10 * 0.016 / 2  # rank 1's extra forward, waited for by the other rank
    v = fires("COMMUNICATION_BOUND", case(window))
    assert v.share == pytest.approx((waits - explained) / window.account.wall_s, rel=0.02)
    assert "the rest waiting for a slow rank" in v.message


def test_straggler_names_the_part_of_its_step_and_the_collective_the_others_wait_in() -> None:
    v = fires("STRAGGLER", case(window_of(slow_forward())))
    assert v.subject == "rank 1"
    assert "160.00 ms more than the other ranks' in the epoch, 160.00 ms of it in forward" in v.message
    assert "rank 0 waits for it in all_gather" in v.message
