"""Human-readable durations: the unit is chosen so the number reads easily."""

from __future__ import annotations


def format_seconds(seconds: float) -> str:
    """``0.000000812`` -> ``"812 ns"``, ``0.0123`` -> ``"12.30 ms"``, ``75.0`` -> ``"75.00 s"``.

    >>> format_seconds(0.0000123)
    '12.3 µs'
    """
    s = abs(seconds)
    if s < 1e-6:
        return f"{seconds * 1e9:.0f} ns"
    if s < 1e-3:
        return f"{seconds * 1e6:.1f} µs"
    if s < 1:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds:.2f} s"


def plural(count: int, noun: str) -> str:
    """``plural(1, "call")`` -> ``"1 call"``, ``plural(1200, "call")`` -> ``"1,200 calls"``."""
    return f"{count:,} {noun}{'' if count == 1 else 's'}"
