"""Stage windows for the tests: a snapshot, its stage and wall time, the account computed from them."""

from __future__ import annotations

from typing import Any

from perfkit import Snapshot
from perfkit.stages import StageWindow, stage_account


def stage_window(stage: str, epoch: int, snapshot: Snapshot, *, wall_s: float, **kwargs: Any) -> StageWindow:
    """The window a recorder would build for these records (one rank)."""
    account = stage_account(snapshot, stage, kwargs.get("loader") or stage, wall_s=wall_s)
    return StageWindow(stage, epoch, snapshot, wall_s, account, **kwargs)
