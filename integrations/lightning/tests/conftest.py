"""Shared set-up for the Lightning tests: quiet W&B offline runs that are always finished."""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True)
def _quiet_lightning() -> Iterator[None]:
    os.environ.setdefault("WANDB_MODE", "offline")
    os.environ.setdefault("WANDB_SILENT", "true")
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*does not have many workers.*")
        warnings.filterwarnings("ignore", message=".*LeafSpec.*")
        warnings.filterwarnings("ignore", message=".*smaller than the logging interval.*")
        yield
