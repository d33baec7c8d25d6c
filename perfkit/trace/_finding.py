"""A finding: a likely cause of slowness, said in words with the number behind it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Finding:
    """A likely bottleneck in words; ``value`` is the fraction (or ratio) that crossed its threshold."""

    kind: str
    message: str
    value: float
