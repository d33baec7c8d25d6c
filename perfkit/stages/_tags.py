"""``tag_step``: attach numbers to the current step, reported with the slowest steps.

    def validation_step(self, batch, batch_idx):
        tag_step(polygons=sum(len(p) for p in batch["polygons"]))

Tags are kept until the step ends (the stage recorder takes them when the step ends).
A value that is not a number is warned about once and left out.
"""

from __future__ import annotations

import numbers
from typing import Any

from .._warn import WarnOnce

_TAGS: dict[str, float] = {}
_warn = WarnOnce()


def tag_step(**tags: Any) -> None:
    """Tag the step in progress, e.g. ``tag_step(polygons=412, image_px=1024)``.

    Values must be numbers (ints, floats, numpy scalars, one-element tensors).
    """
    for name, value in tags.items():
        number = _as_number(value)
        if number is None:
            _warn(
                f"tag:{name}",
                f"perfkit: tag_step({name}={value!r}) is not a number and is left out (said once per tag)",
            )
            continue
        _TAGS[name] = number


def take_tags() -> dict[str, float]:
    """The tags of the step that just ended, clearing them for the next."""
    if not _TAGS:
        return {}
    out = dict(_TAGS)
    _TAGS.clear()
    return out


def _as_number(value: Any) -> float | None:
    if isinstance(value, (bool, str, bytes)):
        return None
    if isinstance(value, numbers.Number):
        return float(value)  # type: ignore[arg-type]
    try:
        return float(value)  # numpy scalars, one-element tensors
    except (TypeError, ValueError, RuntimeError):
        return None
