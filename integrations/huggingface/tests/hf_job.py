"""A Hugging Face Trainer fine-tune of a tiny BERT built from a config (random weights, no download),
with a collate function that sleeps a planted time per batch and a clock of the test's own.

Imported by the tests, and run as a script by ``accelerate launch`` (one JSON line per process:
its rank and its own clock's figures).
"""

from __future__ import annotations

import faulthandler
import gc
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from perfkit_hf import PerfkitCallback
from transformers import (
    BertConfig,
    BertForSequenceClassification,
    Trainer,
    TrainerCallback,
    TrainingArguments,
)

VOCAB, LENGTH = 64, 16


def dataset(n: int) -> list[dict[str, torch.Tensor]]:
    g = torch.Generator().manual_seed(n)
    return [
        {"input_ids": torch.randint(0, VOCAB, (LENGTH,), generator=g), "labels": torch.tensor(i % 2)}
        for i in range(n)
    ]


def model() -> BertForSequenceClassification:
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=VOCAB,
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=LENGTH,
        num_labels=2,
    )
    return BertForSequenceClassification(config)


@dataclass
class SlowCollate:
    """Stacks a batch after sleeping ``sleep_s`` (``slow_s`` from its ``slow_from``-th call on);
    ``spent_s`` is its own clock's total (in this process)."""

    sleep_s: float
    slow_from: int | None = None
    slow_s: float = 0.0
    spent_s: float = 0.0
    calls: int = 0

    def __call__(self, items: list[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
        t0 = time.perf_counter()
        slow = self.slow_from is not None and self.calls >= self.slow_from
        self.calls += 1
        time.sleep(self.slow_s if slow else self.sleep_s)
        batch = {k: torch.stack([x[k] for x in items]) for k in items[0]}
        self.spent_s += time.perf_counter() - t0
        return batch


@dataclass
class Clock(TrainerCallback):  # type: ignore[misc]
    """The test's own clock: each training epoch's wall time, and the collate time inside it."""

    collate: SlowCollate
    epochs: list[tuple[float, float]] = field(default_factory=list)  # (wall_s, collate_s)
    _t0: float = 0.0
    _c0: float = 0.0

    def on_epoch_begin(self, *args: Any, **kwargs: Any) -> None:
        self._t0, self._c0 = time.perf_counter(), self.collate.spent_s

    def on_epoch_end(self, *args: Any, **kwargs: Any) -> None:
        self.epochs.append((time.perf_counter() - self._t0, self.collate.spent_s - self._c0))


def trainer(
    output_dir: Path,
    *,
    sleep_s: float = 0.02,
    accumulate: int = 1,
    workers: int = 0,
    epochs: int = 2,
    samples: int = 64,
    max_steps: int = -1,
    collate: SlowCollate | None = None,
    **perf: Any,
) -> tuple[Trainer, Clock, PerfkitCallback]:
    collate = collate or SlowCollate(sleep_s)
    clock = Clock(collate)
    callback = PerfkitCallback(sample_resources=False, **perf)
    args = TrainingArguments(
        output_dir=str(output_dir),
        per_device_train_batch_size=4,
        per_device_eval_batch_size=8,
        num_train_epochs=epochs,
        max_steps=max_steps,
        gradient_accumulation_steps=accumulate,
        use_cpu=True,
        report_to=[],
        logging_strategy="no",
        save_strategy="no",
        eval_strategy="epoch",
        disable_tqdm=True,
        dataloader_num_workers=workers,
    )
    t = Trainer(
        model=model(),
        args=args,
        train_dataset=dataset(samples),
        eval_dataset=dataset(32),
        data_collator=collate,
        callbacks=[clock, callback],
    )
    return t, clock, callback


if __name__ == "__main__":  # accelerate launch hf_job.py OUT: each rank's own clock in OUT/truth_rankN.json
    faulthandler.enable()
    out = Path(sys.argv[1])
    t, clock, perf = trainer(out, epochs=1)
    t.train()
    rank = t.args.process_index
    # a file per rank: two processes printing to one pipe can interleave their lines
    (out / f"truth_rank{rank}.json").write_text(json.dumps({"rank": rank, "epochs": clock.epochs}))
    # Left to the interpreter's exit, gloo can abort there ("terminate called without an active
    # exception", once in CI): the ranks end together, then the DDP model (which holds the group)
    # goes before the interpreter's teardown. faulthandler names the thread if it happens again.
    if torch.distributed.is_initialized():
        torch.distributed.barrier()
        torch.distributed.destroy_process_group()
    del t, clock, perf
    gc.collect()
