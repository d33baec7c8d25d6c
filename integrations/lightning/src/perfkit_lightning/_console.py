"""perfkit's lines on a Trainer's console: through logging, on rank 0, clear of the progress bar.

The logger is a child of ``lightning.pytorch``, so its lines go where Lightning's own go:
Lightning's console handler when nothing else is configured, the root handlers (a Hydra
job's console and ``.log`` file) when something is. A line logged while tqdm bars are on
screen would be spliced into the bar; it is logged inside ``tqdm.external_write_mode``,
which clears the bars, lets the line out and draws them again.
"""

from __future__ import annotations

import contextlib
import logging
import sys

from lightning.pytorch.utilities import rank_zero_only

log = logging.getLogger("lightning.pytorch.perfkit")


@rank_zero_only
def say(text: str, level: int = logging.INFO) -> None:
    """Log ``text`` on global rank 0 without breaking a progress bar."""
    tqdm = sys.modules.get("tqdm")
    quiet = tqdm.tqdm.external_write_mode() if tqdm is not None else contextlib.nullcontext()
    with quiet:
        log.log(level, text)
