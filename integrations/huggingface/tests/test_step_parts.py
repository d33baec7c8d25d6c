"""Planted step parts under a Hugging Face Trainer with ``PerfkitCallback`` (the tiny BERT of
``hf_job``, built from a config, on CPU): the run's first verdict names the planted part, with its
share of the last training epoch within 5 points of the test's own clock's (``time.perf_counter``
around the planted piece, ``tests.planted_parts.TRUTH``, and around each epoch, from the Trainer's
``on_epoch_begin`` to its ``on_epoch_end``), never perfkit's output.

Plant: an optimizer whose own step sleeps (``tests.planted_parts.SlowSGD``: an EMA of the weights,
a heavy clip), handed to the Trainer as ``optimizers=(optimizer, None)``.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import torch
from perfkit_hf import PerfkitCallback
from transformers import Trainer, TrainerCallback, TrainingArguments

from perfkit.findings import diagnose
from perfkit.names import RUN_DIR_NAME
from perfkit.run import read_run
from tests.planted_parts import TRUTH, SlowSGD

from .hf_job import SlowCollate, dataset, model

TOLERANCE = 0.05


@dataclass
class EpochClock(TrainerCallback):
    """The test's own clock: each training epoch's wall time and its planted parts' seconds."""

    epochs: list[dict[str, float]] = field(default_factory=list)
    _t0: float = 0.0

    def on_epoch_begin(self, *args: Any, **kwargs: Any) -> None:
        TRUTH.reset()
        self._t0 = time.perf_counter()

    def on_epoch_end(self, *args: Any, **kwargs: Any) -> None:
        self.epochs.append({"wall": time.perf_counter() - self._t0, **TRUTH.seconds})


def train(output_dir: Path, *, optimizer_s: float) -> EpochClock:
    """Two epochs of 16 steps with a ``SlowSGD`` whose step takes ``optimizer_s`` more."""
    clock = EpochClock()
    net = model()
    args = TrainingArguments(
        output_dir=str(output_dir),
        per_device_train_batch_size=4,
        num_train_epochs=2,
        use_cpu=True,
        report_to=[],
        logging_strategy="no",
        save_strategy="no",
        eval_strategy="no",
        disable_tqdm=True,
    )
    Trainer(
        model=net,
        args=args,
        train_dataset=dataset(64),
        data_collator=SlowCollate(0.0),
        optimizers=(SlowSGD(net.parameters(), lr=0.01, step_s=optimizer_s), None),
        callbacks=[clock, PerfkitCallback(sample_resources=False, console=False)],
    ).train()
    return clock


def test_a_slow_optimizer_step_is_named_first_with_its_share_by_the_tests_own_clock(
    tmp_path: Path, record_property: Any
) -> None:
    clock = train(tmp_path, optimizer_s=0.04)
    d = diagnose(read_run(tmp_path / RUN_DIR_NAME))
    v = d.verdicts[0]
    last = clock.epochs[-1]
    truth = last["optimizer"] / last["wall"]
    record_property("share", (v.share, truth))
    assert (v.kind, v.stage, v.epoch) == ("OPTIMIZER_STEP", "train", 1)
    assert abs(v.share - truth) < TOLERANCE, (v.share, truth, last)
    assert v.evidence["optimizer_s"] / 16 > 0.04  # 16 steps, each past the planted sleep


@pytest.fixture(autouse=True)
def _one_thread() -> Iterator[None]:
    """One torch thread: on two cores that other work shared, two threads stretched this model's
    step from 2-6 ms (one thread) to 15-450 ms, and COMPUTE_BOUND passed the planted optimizer."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
