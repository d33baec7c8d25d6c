"""``Sketch``: merged quantiles over ranks within 1% of the exact ones over all their samples."""

from __future__ import annotations

import math

import numpy as np
import pytest

from perfkit._sketch import BUCKETS, RELATIVE_ACCURACY, Sketch

QUANTILES = (0.0, 0.01, 0.5, 0.9, 0.95, 0.99, 0.999, 1.0)
TOLERANCE = RELATIVE_ACCURACY * (1 + 1e-9)  # a value on a bucket's edge may round to the next


def relative_error(estimate: float, exact: float) -> float:
    return abs(estimate - exact) / exact


@pytest.mark.parametrize("seed", range(5))
def test_merged_quantiles_of_ranks_are_within_one_percent_of_the_exact_ones(seed: int) -> None:
    """Eight ranks with different step-time distributions (one slow, one heavy-tailed)."""
    rng = np.random.default_rng(seed)
    ranks = [rng.lognormal(math.log(0.02), 0.3, size=rng.integers(50, 5000)) for _ in range(6)]
    ranks.append(rng.lognormal(math.log(0.08), 0.5, size=3000))  # a straggler
    ranks.append(rng.pareto(1.5, size=2000) * 1e-3 + 1e-4)  # a heavy tail
    merged = Sketch.of(ranks[0]).merge(*(Sketch.of(r) for r in ranks[1:]))
    every = np.concatenate(ranks)
    assert merged.count == every.size
    for q in QUANTILES:
        exact = float(np.quantile(every, q, method="lower"))
        assert relative_error(merged.quantile(q), exact) <= TOLERANCE, q


def test_a_merge_is_the_sum_of_the_counts_whatever_the_order() -> None:
    rng = np.random.default_rng(1)
    a, b = Sketch.of(rng.exponential(0.01, 100)), Sketch.of(rng.exponential(1.0, 100))
    assert np.array_equal(a.merge(b).counts, b.merge(a).counts)
    assert np.array_equal(a.merge(b).counts, a.counts + b.counts)


def test_its_size_is_fixed_whatever_it_holds() -> None:
    assert Sketch().counts.shape == Sketch.of(np.linspace(1e-6, 1e3, 100_000)).counts.shape == (BUCKETS,)
    assert BUCKETS * 8 < 16_000  # bytes a rank sends per series per merge


def test_values_out_of_range_are_kept_at_its_ends() -> None:
    s = Sketch.of([0.0, 1e-12, 5e6, math.nan])
    assert s.count == 3
    assert s.quantile(0.0) == 0.0
    assert s.quantile(1.0) == pytest.approx(1e6, rel=RELATIVE_ACCURACY)


def test_an_empty_sketch_has_no_quantile_and_q_is_checked() -> None:
    assert math.isnan(Sketch().quantile(0.5))
    with pytest.raises(ValueError, match="within"):
        Sketch.of([1.0]).quantile(1.5)
    with pytest.raises(ValueError, match="counts"):
        Sketch(np.zeros(3, dtype=np.int64))
