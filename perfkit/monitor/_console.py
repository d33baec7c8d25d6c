"""Lines on a training console: through ``logging``, clear of progress bars.

Where logging is configured (the root logger has handlers: a Hydra job's console and ``.log``
file, an application's own set-up), a line goes to the adapter's own logger, which
propagates to them. Where nothing is configured, it goes to ``fallback``: a logger that
reaches the console by itself (Lightning's own handler; for the Hugging Face Trainer, whose
library logger shows warnings only, a handler of perfkit's). A line logged while tqdm bars
are on screen would be spliced into a bar, so it is logged inside
``tqdm.external_write_mode``, which clears the bars, lets the line out and draws them again.
"""

from __future__ import annotations

import contextlib
import logging
import sys


def say_through(
    logger: logging.Logger, fallback: logging.Logger, text: str, level: int = logging.INFO
) -> None:
    """Log ``text`` to ``logger`` where logging is configured, else to ``fallback``; never inside a bar.

    >>> import logging
    >>> say_through(logging.getLogger("doctest"), logging.getLogger("doctest"), "hello")
    """
    target = logger if logging.getLogger().hasHandlers() else fallback
    tqdm = sys.modules.get("tqdm")
    quiet = tqdm.tqdm.external_write_mode() if tqdm is not None else contextlib.nullcontext()
    with quiet:
        target.log(level, text)


def console_logger(name: str) -> logging.Logger:
    """A logger that shows INFO lines on stderr by itself (its own handler, not propagating):
    the fallback of a framework whose loggers show warnings only."""
    logger = logging.getLogger(name)
    if not logger.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(message)s"))
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        logger.propagate = False
    return logger
