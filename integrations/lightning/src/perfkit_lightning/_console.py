"""perfkit's lines on a Trainer's console: through logging, on rank 0, clear of the progress bar
(``perfkit.monitor.say_through``).

Where logging is configured (a Hydra job's console and ``.log`` file), lines go to the
``perfkit.lightning`` logger, which propagates to it; where nothing is, to a child of Lightning's
logger, ``lightning.pytorch.perfkit``, and so to the console handler Lightning installs for its
own messages. (Lightning's logger stops propagating when it installs that handler at import,
before a Hydra app configures logging: a child of it would never reach Hydra's job log.)
"""

from __future__ import annotations

import logging
import warnings

from lightning.pytorch.utilities import rank_zero_only

from perfkit import PerfkitWarning
from perfkit.monitor import say_through

log = logging.getLogger("perfkit.lightning")
fallback = logging.getLogger("lightning.pytorch.perfkit")


@rank_zero_only
def say(text: str, level: int = logging.INFO) -> None:
    """Log ``text`` on global rank 0 without breaking a progress bar."""
    say_through(log, fallback, text, level)


def warn(message: str) -> None:
    """A ``PerfkitWarning`` from inside a fit; where warnings are errors, logged instead (never raised)."""
    try:
        warnings.warn(message, PerfkitWarning, stacklevel=3)
    except Exception:  # -W error: a warning must not stop training
        (log if logging.getLogger().hasHandlers() else fallback).warning("%s", message)
