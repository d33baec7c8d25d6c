"""PrometheusSink for real: prometheus_client's own HTTP server scraped over a socket, its text file
read back, each rank's figures of a merged window as labelled gauges."""

from __future__ import annotations

import urllib.request
from dataclasses import replace
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

import perfkit
from perfkit.sinks import PrometheusSink
from perfkit.stages import Account, RankPart
from tests.conftest import FakeClock

from .test_sinks import two_epochs


def samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_a_scrape_reads_each_stage_last_window_with_the_stage_as_a_label(
    clock: FakeClock, reg: perfkit.Registry
) -> None:
    sink = PrometheusSink(0, addr="127.0.0.1")  # port 0: the system picks a free one
    try:
        metrics = two_epochs(clock, reg, [sink])
        port = sink.server[0].server_port
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as got:
            scraped = samples(got.read().decode())
    finally:
        sink.close()
    train, val = metrics[2], metrics[3]  # the second epoch's windows
    label = {"stage": "val", "scope": "epoch"}
    assert scraped[("perfkit_epoch", frozenset(label.items()))] == 1
    for key, value in val.items():
        name = "perfkit_" + key.removeprefix("perf/val/").replace("/", "_")
        assert scraped[(name, frozenset(label.items()))] == pytest.approx(value)
    steps = ("perfkit_steps", frozenset({"stage": "train", "scope": "epoch"}.items()))
    assert scraped[steps] == train["perf/train/steps"]


def test_each_rank_of_a_merged_window_is_a_labelled_series_and_missing_ranks_are_counted(
    tmp_path: Path, clock: FakeClock, reg: perfkit.Registry
) -> None:
    with perfkit.window("train", epoch=0, registry=reg) as w:
        clock.advance(10_000_000)
    ranks = tuple(
        RankPart(r, 1.0 + r, 10, 0.05 * (r + 1), Account(1.0 + r, {"data_wait": 0.1 * r, "step": 0.5}))
        for r in range(3)
    )
    merged = replace(w.window, ranks=ranks, missing_ranks=(3,))
    sink = PrometheusSink(textfile=tmp_path / "perfkit.prom")
    sink.emit(merged, w.metrics, step=0)
    scraped = samples((tmp_path / "perfkit.prom").read_text())
    for r in range(3):
        rank = {"stage": "train", "rank": str(r)}
        assert scraped[("perfkit_rank_wall_seconds", frozenset(rank.items()))] == 1.0 + r
        assert scraped[("perfkit_rank_step_mean_seconds", frozenset(rank.items()))] == 0.05 * (r + 1)
        part = frozenset({**rank, "part": "data_wait"}.items())
        assert scraped[("perfkit_rank_seconds", part)] == pytest.approx(0.1 * r)
    assert scraped[("perfkit_ranks_missing", frozenset({"stage": "train"}.items()))] == 1


def test_a_port_out_of_range_is_refused_naming_it() -> None:
    with pytest.raises(ValueError, match="port must be an int in \\[0, 65,535\\], got 70000"):
        PrometheusSink(70000)
