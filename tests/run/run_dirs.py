"""Run directories for the report and reader tests, written by ``perfkit.window`` on a fake clock.

``synthetic_run`` gives exact numbers: training takes 8 batches of 4 samples per epoch, each
waiting 1 ms for data and computing 3 ms (growing by half each epoch, inside ``forward``);
validation takes 4 batches of 4, waiting 12 ms and computing 3 ms in ``postprocess``.
Process memory is sampled after every step and grows 50 MB per epoch.
"""

from __future__ import annotations

import functools
import shutil
from collections.abc import Iterator
from pathlib import Path

import numpy as np

import perfkit
from perfkit.run import RunWriter
from perfkit.trace import analyze_trace
from tests.conftest import FakeClock

window = functools.partial(perfkit.window, console=False)
"""perfkit.window, without its console block."""

MS = 1_000_000
TRACE = Path(__file__).parents[1] / "data" / "traces" / "torch_cpu_marked.pt.trace.json.gz"


class SlowLoader:
    """Batches of ``size`` rows; each one keeps the caller waiting ``wait_ns`` on the fake clock."""

    def __init__(self, clock: FakeClock, *, batches: int, size: int, wait_ns: int) -> None:
        self.clock, self.batches, self.size, self.wait_ns = clock, batches, size, wait_ns

    def __iter__(self) -> Iterator[dict[str, np.ndarray]]:
        for _ in range(self.batches):
            self.clock.advance(self.wait_ns)
            yield {"x": np.zeros((self.size, 4)), "y": np.zeros(self.size)}


def synthetic_run(
    path: Path,
    clock: FakeClock,
    reg: perfkit.Registry,
    *,
    epochs: int = 3,
    finish: bool = True,
    trace: bool = False,
) -> Path:
    """Train and validate for ``epochs``; ``trace`` adds a profiler window of training's epoch 1."""
    run = RunWriter(path, meta={"script": "synthetic"})
    for epoch in range(epochs):
        with window("train", epoch=epoch, run=run, registry=reg) as w:
            for _ in w.iterate(SlowLoader(clock, batches=8, size=4, wait_ns=1 * MS)):
                with perfkit.section("forward", registry=reg):
                    clock.advance(int(3 * MS * (1 + 0.5 * epoch)))
                reg.gauge("process.rss_mb", 400.0 + 50 * epoch)
        with window("val", epoch=epoch, run=run, registry=reg) as w:
            for _ in w.iterate(SlowLoader(clock, batches=4, size=4, wait_ns=12 * MS)):
                with perfkit.section("postprocess", registry=reg):
                    clock.advance(3 * MS)
                reg.gauge("process.rss_mb", 400.0 + 50 * epoch)
    if trace:
        add_trace(run, stage="train", epoch=1)
    if finish:
        run.finish(reg.snapshot())
    return path


def add_trace(run: RunWriter, *, stage: str, epoch: int) -> Path:
    """Copy the real CPU trace of the test data under the run directory; record it with its analysis."""
    trace = run.path / "traces" / f"{stage}_epoch{epoch}.pt.trace.json.gz"
    trace.parent.mkdir(exist_ok=True)
    shutil.copy(TRACE, trace)
    summary = analyze_trace(trace).to_dict()
    run.add_trace(stage=stage, epoch=epoch, trace=trace, summary=summary)
    return trace
