"""The Lightning module trains and validates on CPU; the loaders are wired as configured."""

from __future__ import annotations

import lightning.pytorch as pl
import pytest
import torch

import perfkit
from examples.ocr_dbnet.data import SyntheticReceipts
from examples.ocr_dbnet.module import DBNetModule, make_loaders
from examples.ocr_dbnet.targets import db_collate_fn


@pytest.mark.filterwarnings("ignore:.*does not have many workers:UserWarning")
@pytest.mark.filterwarnings("ignore:.*LeafSpec.*:FutureWarning")  # Lightning 2.6 on torch 2.13
def test_one_tiny_fit_logs_the_loss_and_the_detection_metrics() -> None:
    torch.manual_seed(0)
    train, val = make_loaders(train_size=8, val_size=4, image_size=128, lines=(4, 8), batch_size=4)
    trainer = pl.Trainer(
        max_epochs=1,
        limit_train_batches=2,
        limit_val_batches=1,
        accelerator="cpu",
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    with perfkit.use_registry(perfkit.Registry()) as reg:
        trainer.fit(DBNetModule(lr=1e-3), train, val)
    metrics = trainer.callback_metrics
    for name in ("train/loss", "val/loss", "val/precision", "val/recall", "val/hmean"):
        assert name in metrics, name
        assert torch.isfinite(metrics[name]), name
    assert 0 <= metrics["val/hmean"] <= 1
    snap = reg.snapshot()
    assert snap["postprocess"].count >= 1  # each validation image, timed in the main process
    assert ("postprocess", "pyclipper.unclip") in snap.tree or ("postprocess",) in snap.tree


def test_loaders_augment_train_only_and_collate_db_targets() -> None:
    train, val = make_loaders(train_size=6, val_size=3, image_size=64, lines=(2, 3), batch_size=2)
    assert isinstance(train.dataset, SyntheticReceipts)
    assert isinstance(val.dataset, SyntheticReceipts)
    assert (len(train.dataset), len(val.dataset)) == (6, 3)
    assert train.dataset.augment
    assert not val.dataset.augment
    assert train.dataset.seed != val.dataset.seed
    assert train.collate_fn is db_collate_fn
    assert val.collate_fn is db_collate_fn
    assert train.batch_size == 2
    assert train.num_workers == 0
    assert not train.persistent_workers


def test_worker_settings_reach_the_loaders() -> None:
    train, _ = make_loaders(num_workers=2, multiprocessing_context="spawn", persistent_workers=True)
    assert train.num_workers == 2
    assert train.persistent_workers
    assert train.multiprocessing_context is not None
    assert train.multiprocessing_context.get_start_method() == "spawn"
