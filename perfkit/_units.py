"""Human-readable numbers: the unit is chosen so the number reads easily.

Every renderer (text and HTML) and every rule message formats durations, sizes and counts
here, so one number reads the same wherever it is shown.
"""

from __future__ import annotations


def format_seconds(seconds: float, *, sign: bool = False) -> str:
    """``0.000000812`` -> ``"812 ns"``, ``0.0123`` -> ``"12.30 ms"``, ``75.0`` -> ``"75.00 s"``;
    ``sign`` writes a ``+`` before a change that is not negative.

    >>> format_seconds(0.0000123), format_seconds(0.0123, sign=True)
    ('12.3 µs', '+12.30 ms')
    """
    if sign:
        return ("+" if seconds >= 0 else "-") + format_seconds(abs(seconds))
    s = abs(seconds)
    if s < 1e-6:
        return f"{seconds * 1e9:.0f} ns"
    if s < 1e-3:
        return f"{seconds * 1e6:.1f} µs"
    if s < 1:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds:.2f} s"


def format_us(us: float, *, sign: bool = False) -> str:
    """A duration in µs (a trace's unit) as ``format_seconds`` writes it.

    >>> format_us(1500.0), format_us(-20.0, sign=True)
    ('1.50 ms', '-20.0 µs')
    """
    return format_seconds(us / 1e6, sign=sign)


def format_bytes(n: float) -> str:
    """``12_300_000`` -> ``"12.3 MB"`` (decimal units, as a trace's memory events count).

    >>> format_bytes(230)
    '230 B'
    """
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(n) >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n:.0f} B"


def plural(count: int, noun: str) -> str:
    """``plural(1, "call")`` -> ``"1 call"``, ``plural(1200, "call")`` -> ``"1,200 calls"``."""
    return f"{count:,} {noun}{'' if count == 1 else 's'}"
