"""What a run lost is in its report and its console summary (issue 14, item 13).

A DataLoader worker that makes more records in one batch than it may hand over
(``OUTBOX_MAX``) drops the rest; the main process counts them. That count used to stay in
``snapshot.dropped_in_transfer``; the report's "Missing from this run" list and the
console summary now say it, with the registry's own drops.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import pytest

import perfkit
from perfkit.reports import summary_text, write_html_report
from perfkit.run import RunWriter
from perfkit.stages import stage_metrics
from tests.conftest import FakeClock

window = functools.partial(perfkit.window, console=False)
"""perfkit.window, without its console block."""

RECORDS = 300_000  # in one batch, in the worker


class Chatty:
    """One item whose making records RECORDS sections (a per-row transform, say)."""

    def __len__(self) -> int:
        return 1

    def __getitem__(self, i: int) -> Any:
        import torch

        work = perfkit.section("row")
        for _ in range(RECORDS):
            with work:
                pass
        return torch.zeros(2)


def test_records_workers_dropped_are_in_the_report_and_the_summary(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    from torch.utils.data import DataLoader

    import perfkit.torch as ptorch
    from perfkit._mailbox import OUTBOX_MAX

    reg = perfkit.Registry()
    run = RunWriter(tmp_path / "run")
    loader = DataLoader(Chatty(), batch_size=1, num_workers=1, multiprocessing_context="fork")
    with perfkit.use_registry(reg), window("train", epoch=0, run=run) as w:
        for _ in w.iterate(ptorch.instrument(loader, "train")):
            pass
    run.finish(reg.snapshot())
    assert w.window is not None
    snap = w.window.snapshot
    dropped = snap.dropped_in_transfer
    # the rows, then the batch's fetch, its CPU time and (where Linux keeps it) its wait for a core
    per_batch = 3 if Path("/proc/thread-self/schedstat").exists() else 2
    assert dropped == RECORDS + per_batch - OUTBOX_MAX
    assert snap["row"].count == OUTBOX_MAX
    lines = summary_text(w.window, stage_metrics(w.window)).splitlines()
    assert f"  lost     {dropped:,} worker records dropped in transfer" in lines
    page = write_html_report(tmp_path / "run").read_text()
    assert f"train epoch 0: {dropped:,} records dropped by DataLoader workers" in page


def test_records_the_registry_dropped_are_in_the_summary(clock: FakeClock) -> None:
    reg = perfkit.Registry(clock=clock, max_series=5)
    with pytest.warns(perfkit.PerfkitWarning), window("val", epoch=0, registry=reg) as w:
        for i in w.iterate(range(3)):
            reg.record(f"item{i}", clock(), clock() + 1)
            with perfkit.section(f"extra{i}", registry=reg):
                pass
    assert w.window is not None
    assert w.window.snapshot["val.step"].count == 3  # the stage's own series are never crowded out
    dropped = w.window.snapshot.dropped
    assert sum(dropped.values()) > 0
    lost = [x for x in summary_text(w.window, w.metrics).splitlines() if x.startswith("  lost ")]
    assert lost == ["  lost     " + "; ".join(f"{n:,} records dropped ({why})" for why, n in dropped.items())]
