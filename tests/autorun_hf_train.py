"""A Hugging Face Trainer run as a plain script (no perfkit code), for ``perfkit run``: a tiny BERT
built from a config, two epochs, an evaluation after each (eval_strategy="epoch")."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integrations" / "huggingface" / "tests"))

from hf_job import SlowCollate, dataset, model
from transformers import Trainer, TrainingArguments

args = TrainingArguments(
    output_dir=sys.argv[1],
    per_device_train_batch_size=4,
    per_device_eval_batch_size=8,
    num_train_epochs=2,
    use_cpu=True,
    report_to=[],
    logging_strategy="no",
    save_strategy="no",
    eval_strategy="epoch",
    disable_tqdm=True,
)
Trainer(
    model=model(),
    args=args,
    train_dataset=dataset(64),
    eval_dataset=dataset(32),
    data_collator=SlowCollate(0.0),
).train()
