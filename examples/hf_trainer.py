"""perfkit on a Hugging Face Trainer: a tiny BERT built from a config (random weights, no
download) fine-tuned on CPU, with a collate function that tokenises slowly, as a real one can.

    python examples/hf_trainer.py [OUTPUT_DIR]

One callback, ``PerfkitCallback()``: each training epoch and each evaluation gets its console
block and verdict, the metrics go through ``Trainer.log`` to every ``report_to`` tracker, and the
run directory is ``OUTPUT_DIR/perfkit-run`` (``perfkit summary OUTPUT_DIR`` reads it back).
"""

from __future__ import annotations

import logging
import sys
import tempfile
import time

import torch
from perfkit_hf import PerfkitCallback
from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainingArguments

VOCAB, LENGTH = 128, 32


def tokenise_slowly(texts: list[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    """A stand-in for a tokenizer run in the collate function: 15 ms a batch."""
    time.sleep(0.015)
    return {key: torch.stack([t[key] for t in texts]) for key in texts[0]}


def main(output_dir: str) -> None:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    logging.getLogger("transformers").setLevel(logging.WARNING)
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=64, max_position_embeddings=LENGTH, num_labels=2,
    )  # fmt: skip
    g = torch.Generator().manual_seed(1)
    data = [
        {"input_ids": torch.randint(0, VOCAB, (LENGTH,), generator=g), "labels": torch.tensor(i % 2)}
        for i in range(256)
    ]
    args = TrainingArguments(
        output_dir=output_dir,
        per_device_train_batch_size=16,
        per_device_eval_batch_size=32,
        num_train_epochs=2,
        eval_strategy="epoch",
        use_cpu=True,
        report_to=[],
        logging_strategy="no",
        save_strategy="no",
        disable_tqdm=True,
    )
    trainer = Trainer(
        model=BertForSequenceClassification(config),
        args=args,
        train_dataset=data[:192],
        eval_dataset=data[192:],
        data_collator=tokenise_slowly,
        callbacks=[PerfkitCallback()],
    )
    trainer.train()


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp(prefix="perfkit-hf-"))
