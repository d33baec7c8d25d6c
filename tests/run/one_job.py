"""One job of the two-jobs test: ``python one_job.py TAG BASE ROUNDS EPOCHS``.

It says it is ready (``BASE/TAG.ready``), waits for the test's ``BASE/go`` (the shared start
time, a wall-clock instant), then for each round writes ``EPOCHS`` training windows to
``BASE/runR``. Every window ends at the same instant in both jobs (start + k periods), so their
writes race; each records its own section, ``TAG.work``, to tell whose data a snapshot holds.
"""

from __future__ import annotations

import functools
import sys
import time
from pathlib import Path

import perfkit
from perfkit.run import RunWriter

window = functools.partial(perfkit.window, console=False)
"""perfkit.window, without its console block."""

PERIOD_S = 0.04


def wait_until(instant: float) -> None:
    """Block until the wall clock reaches ``instant`` (a rendezvous, not a measurement)."""
    while time.time() < instant:
        time.sleep(min(0.002, max(0.0, instant - time.time())))


def main(tag: str, base: Path, rounds: int, epochs: int) -> None:
    (base / f"{tag}.ready").touch()
    go = base / "go"
    while not go.exists() or not go.read_text():
        time.sleep(0.005)
    start = float(go.read_text())
    for r in range(rounds):
        run, reg = RunWriter(base / f"run{r}", meta={"tag": tag}), perfkit.Registry()
        for epoch in range(epochs):
            with window("train", epoch=epoch, run=run, registry=reg) as w:
                for _ in w.iterate(range(3)):
                    with perfkit.section(f"{tag}.work", registry=reg):
                        pass
                wait_until(start + (r * epochs + epoch + 1) * PERIOD_S)
        run.finish(reg.snapshot())
    print(run.job)


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))
