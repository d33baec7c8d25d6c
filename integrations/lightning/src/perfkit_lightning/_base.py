"""What every perfkit callback shares: joining the Trainer's driver, leaving it, switching off.

A callback that is disabled (``enabled=False``, or perfkit disabled by ``PERFKIT_DISABLED=1``
or ``perfkit.disable()``) leaves ``trainer.callbacks`` in ``setup``, so it costs nothing per
step. The batch-end hooks of all four stages are generated here, once: each hands the batch
to the driver, which counts its samples once however many perfkit callbacks see it.
"""

from __future__ import annotations

from typing import Any

import lightning
from lightning.pytorch import LightningModule, Trainer

import perfkit

from ._console import say, warn
from ._driver import Driver, Member, attach

_said_disabled = False


class PerfkitCallback(Member):
    """A perfkit callback on a Trainer: the driver's member between ``setup`` and ``teardown``."""

    enabled: bool = True
    _driver: Driver | None = None

    def setup(self, trainer: Trainer, pl_module: LightningModule, stage: str) -> None:
        if not self.enabled or not perfkit.is_enabled():
            if not perfkit.is_enabled():
                _say_disabled()
            # Leave the callback list, so a disabled callback costs nothing per step.
            # (Trainer sets .callbacks in its connector, so type checkers do not see it.)
            trainer_any: Any = trainer
            trainer_any.callbacks = [c for c in trainer_any.callbacks if c is not self]
            return
        if self._driver is not None:  # a second fit on the same Trainer without teardown
            return
        driver = self._driver = attach(trainer, self)
        if driver.missing is not None:
            warn(
                f"perfkit: this Lightning ({lightning.__version__}) has no {driver.missing}; perfkit's stage "
                "metrics are off"
            )
        self.joined(trainer, pl_module, driver)

    def teardown(self, trainer: Trainer, pl_module: LightningModule, stage: str) -> None:
        self._leave(trainer, failed=False)

    def on_exception(self, trainer: Trainer, pl_module: LightningModule, exception: BaseException) -> None:
        # Lightning calls no teardown hook after an exception: leave the driver here.
        self._leave(trainer, failed=True)

    def _leave(self, trainer: Trainer, *, failed: bool) -> None:
        driver, self._driver = self._driver, None
        if driver is None:
            return
        try:
            self.leaving(trainer, driver, failed=failed)
        finally:
            driver.leave(self)

    # ---- what subclasses add ----------------------------------------------------------------

    def joined(self, trainer: Trainer, pl_module: LightningModule, driver: Driver) -> None:
        """Called once the driver is there (subclasses set up their outputs)."""

    def leaving(self, trainer: Trainer, driver: Driver, *, failed: bool) -> None:
        """Called before leaving the driver (subclasses flush their outputs)."""


def _batch_end(stage: str) -> Any:
    def hook(
        self: PerfkitCallback, trainer: Trainer, pl_module: LightningModule, *args: Any, **kwargs: Any
    ) -> None:
        # (outputs, batch, batch_idx[, dataloader_idx]) for every stage
        driver = self._driver
        if driver is not None:
            batch = args[1] if len(args) > 1 else kwargs.get("batch")
            driver.batch_done(stage, batch)

    hook.__name__ = f"on_{'validation' if stage == 'val' else stage}_batch_end"
    return hook


for _stage in ("train", "val", "test", "predict"):
    _hook = _batch_end(_stage)
    setattr(PerfkitCallback, _hook.__name__, _hook)


def _say_disabled() -> None:
    global _said_disabled
    if not _said_disabled:
        _said_disabled = True
        say("perfkit is disabled (PERFKIT_DISABLED or perfkit.disable()): its callbacks do nothing")
