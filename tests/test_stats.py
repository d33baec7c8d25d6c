"""Statistics agree with numpy on the retained samples, and merging equals recording the union."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import perfkit

from .conftest import FakeClock

durations = st.lists(st.integers(min_value=0, max_value=10**10), min_size=1, max_size=300)


def registry_with(values: list[int], capacity: int = 10_000, name: str = "s") -> perfkit.Registry:
    clock = FakeClock()
    reg = perfkit.Registry(capacity=capacity, clock=clock)
    for d in values:
        t0 = clock()
        clock.advance(d)
        reg.record(name, t0, clock())
    return reg


@settings(max_examples=150, deadline=None)
@given(durations)
def test_statistics_equal_numpy_when_every_sample_is_retained(values: list[int]) -> None:
    s = registry_with(values).snapshot()["s"]
    x = np.array(values, dtype=np.float64) / 1e9
    assert s.count == len(values)
    assert s.total_s == pytest.approx(x.sum(), rel=1e-12)
    assert s.mean_s == pytest.approx(np.mean(x), rel=1e-12)
    assert s.median_s == pytest.approx(np.median(x), rel=1e-12, abs=1e-18)
    assert s.p95_s == pytest.approx(np.percentile(x, 95), rel=1e-12, abs=1e-18)
    assert s.p99_s == pytest.approx(np.percentile(x, 99), rel=1e-12, abs=1e-18)
    assert s.std_s == pytest.approx(np.std(x), rel=1e-9, abs=1e-15)
    assert (s.min_s, s.max_s) == (x.min(), x.max())
    assert (s.n_samples, s.dropped, s.errors) == (len(values), 0, 0)


@settings(max_examples=100, deadline=None)
@given(durations, st.integers(min_value=1, max_value=50))
def test_percentiles_come_from_the_newest_capacity_samples(values: list[int], capacity: int) -> None:
    s = registry_with(values, capacity=capacity).snapshot()["s"]
    kept = np.array(values[-capacity:], dtype=np.float64) / 1e9
    assert s.n_samples == len(kept)
    assert s.p95_s == pytest.approx(np.percentile(kept, 95), rel=1e-12, abs=1e-18)
    # count, total, mean and std cover all samples, retained or not
    everything = np.array(values, dtype=np.float64) / 1e9
    assert s.total_s == pytest.approx(everything.sum(), rel=1e-12)
    assert s.std_s == pytest.approx(np.std(everything), rel=1e-6, abs=1e-12)


@settings(max_examples=100, deadline=None)
@given(st.lists(durations, min_size=1, max_size=4))
def test_merged_snapshots_equal_a_snapshot_of_the_union(parts: list[list[int]]) -> None:
    merged = registry_with(parts[0]).snapshot().merge(*(registry_with(p).snapshot() for p in parts[1:]))
    union = registry_with([d for p in parts for d in p]).snapshot()
    a, b = merged["s"], union["s"]
    assert (a.count, a.total_s, a.min_s, a.max_s, a.n_samples) == (
        b.count,
        b.total_s,
        b.min_s,
        b.max_s,
        b.n_samples,
    )
    assert a.mean_s == pytest.approx(b.mean_s, rel=1e-12)
    assert a.median_s == pytest.approx(b.median_s, rel=1e-12, abs=1e-18)
    assert a.p99_s == pytest.approx(b.p99_s, rel=1e-12, abs=1e-18)
    assert a.std_s == pytest.approx(b.std_s, rel=1e-6, abs=1e-12)


def test_merge_adds_series_that_only_some_parts_have() -> None:
    a = registry_with([1, 2], name="train").snapshot()
    b = registry_with([3], name="val").snapshot()
    merged = a.merge(b)
    assert {k: merged[k].count for k in merged} == {"train": 2, "val": 1}
    assert merged.tree[("train",)].count == 2
