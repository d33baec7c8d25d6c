"""``DBNetModule`` (Lightning) and ``make_loaders``: the DBNet pipeline ready for a ``Trainer``.

    train, val = make_loaders(train_size=16, val_size=8, batch_size=4, num_workers=2)
    trainer = lightning.Trainer(max_epochs=1, accelerator="cpu")
    trainer.fit(DBNetModule(lr=1e-3), train, val)

Validation runs the post-processing on every probability map (``postprocess``, timed per image
with ``@perfkit.timed``) and logs ``val/precision``, ``val/recall``, ``val/hmean``.
"""

from __future__ import annotations

from typing import Any

import lightning.pytorch as pl
import torch
from torch.utils.data import DataLoader

from .data import Sample, SyntheticReceipts
from .metrics import DetectionMetric
from .model import DBLoss, DBNet, DBOutput
from .postprocess import postprocess
from .targets import Batch, db_collate_fn


class DBNetModule(pl.LightningModule):
    """DBNet trained with the DB loss; validation also measures detection precision/recall/hmean.

    ``postprocess_kwargs`` go to ``postprocess`` (thresh, box_thresh, unclip_ratio, ...).
    """

    def __init__(self, *, lr: float = 1e-3, k: float = 50.0, **postprocess_kwargs: Any) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.lr = lr
        self.model = DBNet(k=k)
        self.loss = DBLoss()
        self.postprocess_kwargs = postprocess_kwargs
        self.metric = DetectionMetric()

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        """The probability maps (N, 1, H, W)."""
        out: DBOutput = self.model(images)
        return out["prob"]

    def on_train_epoch_start(self) -> None:
        # New augmentations each epoch; the epoch is shared memory, so persistent workers see it too.
        dataset = getattr(self.trainer.train_dataloader, "dataset", None)
        if isinstance(dataset, SyntheticReceipts):
            dataset.set_epoch(self.current_epoch)

    def training_step(self, batch: Batch, batch_idx: int) -> torch.Tensor:
        losses: dict[str, torch.Tensor] = self.loss(self.model(batch["image"]), batch)
        loss = losses["loss"]
        self.log("train/loss", loss, batch_size=len(batch["image"]))
        return loss

    def on_validation_epoch_start(self) -> None:
        self.metric.reset()

    def validation_step(self, batch: Batch, batch_idx: int) -> None:
        out = self.model(batch["image"])
        self.log("val/loss", self.loss(out, batch)["loss"], batch_size=len(batch["image"]))
        probs = out["prob"][:, 0].float().cpu().numpy()
        detections = [postprocess(prob, **self.postprocess_kwargs) for prob in probs]  # @timed per image
        for (boxes, _), polygons, ignore in zip(detections, batch["polygons"], batch["ignore"], strict=True):
            self.metric.update(boxes, polygons, ignore)

    def on_validation_epoch_end(self) -> None:
        for name, value in self.metric.compute().items():
            self.log(f"val/{name}", value)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.Adam(self.parameters(), lr=self.lr)


def make_loaders(
    *,
    train_size: int = 16,
    val_size: int = 8,
    image_size: int = 256,
    lines: tuple[int, int] = (8, 14),
    batch_size: int = 4,
    num_workers: int = 0,
    multiprocessing_context: str | None = None,
    persistent_workers: bool = False,
    seed: int = 0,
    val_image_size: int | None = None,
    val_lines: tuple[int, int] | None = None,
) -> tuple[DataLoader[Sample], DataLoader[Sample]]:
    """Train (augmented, shuffled) and val loaders of synthetic receipts, collated by ``db_collate_fn``.

    Train and val receipts come from different seeds, so they never coincide. Validation may use
    larger, denser receipts (``val_image_size``, ``val_lines``), as OCR pipelines validate on whole
    pages while they train on smaller crops.
    """
    common: dict[str, Any] = {
        "batch_size": batch_size,
        "num_workers": num_workers,
        "collate_fn": db_collate_fn,
        "multiprocessing_context": multiprocessing_context if num_workers else None,
        "persistent_workers": persistent_workers and num_workers > 0,
    }
    train = SyntheticReceipts(train_size, image_size=image_size, lines=lines, seed=seed, augment=True)
    val = SyntheticReceipts(
        val_size, image_size=val_image_size or image_size, lines=val_lines or lines, seed=seed + 1_000_003
    )
    generator = torch.Generator().manual_seed(seed)
    return (
        DataLoader(train, shuffle=True, drop_last=False, generator=generator, **common),
        DataLoader(val, shuffle=False, **common),
    )
