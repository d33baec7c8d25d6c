"""A detector that already finds text: trained once, cached, then fine-tuned by the demo.

The demo's two instrumented epochs are too few for DBNet to learn to find text
lines, and an untrained model finds no box, so validation's post-processing
would never unclip anything. Users fine-tune detectors that do find text; this
trains one the same way (same data, same loss), without perfkit recording it.
"""

from __future__ import annotations

import logging
import time
import warnings
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import torch

import perfkit

from .module import DBNetModule, make_loaders

log = logging.getLogger(__name__)


def pretrained_weights(
    cache_dir: str | Path, *, epochs: int, lr: float, data: dict[str, Any]
) -> dict[str, Any]:
    """The state dict of a DBNet trained for ``epochs`` epochs, from the cache or trained now."""
    path = Path(cache_dir) / f"dbnet_{data['image_size']}px_{epochs}ep.pt"
    if path.exists():
        state: dict[str, Any] = torch.load(path, weights_only=True)
        return state
    log.info("[demo] training the detector once, %d epochs (cached in %s) ...", epochs, path)
    t0 = time.perf_counter()
    train, _ = make_loaders(**{**data, "num_workers": 0})
    module = DBNetModule(lr=lr)
    trainer = pl.Trainer(
        max_epochs=epochs,
        accelerator="cpu",
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        limit_val_batches=0,
    )
    was_on = perfkit.is_enabled()
    perfkit.disable()  # the demo's numbers are about the instrumented run only
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*no `val_dataloader`.*")
            trainer.fit(module, train)
    finally:
        if was_on:  # PERFKIT_DISABLED=1 keeps the whole run switched off
            perfkit.enable()
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(module.state_dict(), path)
    log.info("[demo] done in %.0f s", time.perf_counter() - t0)
    return module.state_dict()
