"""Argument checks shared by the entry points: fail at construction, naming the parameter.

Also what a record must be to enter a registry (``check_time``, ``salvage``): a record is
three ints, and one value that is not (a float clock, a None, a number past int64) must
never reach numpy, where it would fail every later drain.
"""

from __future__ import annotations

import math
import numbers
import re
from typing import Any

TIME_LIMIT = 2**61
"""Largest absolute time a record may carry, in ns (73 years), so ``end - start`` fits int64."""


def check_name(name: object, parameter: str = "name") -> str:
    """``name`` as a non-empty str; another type is a ``TypeError``, ``""`` a ``ValueError``.

    >>> check_name("val", "stage")
    'val'
    >>> check_name(3, "stage")
    Traceback (most recent call last):
    ...
    TypeError: stage must be a non-empty str, got 3 of type int
    """
    if not isinstance(name, str):
        raise TypeError(f"{parameter} must be a non-empty str, got {name!r} of type {type(name).__name__}")
    if not name:
        raise ValueError(f"{parameter} must be a non-empty str, got {name!r}")
    return name


def check_int(value: object, parameter: str, *, low: int = 0, high: int | None = None) -> int:
    """``value`` as an int in ``[low, high]``; bools, floats and strings are refused, naming ``parameter``.

    >>> check_int(3, "repeat", low=1, high=10)
    3
    >>> check_int(True, "repeat")
    Traceback (most recent call last):
    ...
    ValueError: repeat must be an int >= 0, got True
    """
    bounds = f">= {low}" if high is None else f"in [{low}, {high:,}]"
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{parameter} must be an int {bounds}, got {value!r}")
    out = int(value)
    if out < low or (high is not None and out > high):
        raise ValueError(f"{parameter} must be an int {bounds}, got {value!r}")
    return out


def check_number(value: object, parameter: str, *, low: float = 0.0, high: float | None = None) -> float:
    """``value`` as a finite float in ``(low, high]``; NaN, inf and bools are refused, naming ``parameter``.

    >>> check_number(0.5, "interval_s", high=3600)
    0.5
    >>> check_number(float("inf"), "interval_s")
    Traceback (most recent call last):
    ...
    ValueError: interval_s must be a finite number > 0.0, got inf
    """
    bounds = f"> {low}" if high is None else f"in ({low}, {high:g}]"
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{parameter} must be a finite number {bounds}, got {value!r}")
    out = float(value)
    if not math.isfinite(out) or out <= low or (high is not None and out > high):
        raise ValueError(f"{parameter} must be a finite number {bounds}, got {value!r}")
    return out


def check_time(value: object, parameter: str) -> int:
    """A record's start or end: an int of nanoseconds within ``TIME_LIMIT`` of zero."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(
            f"{parameter} must be an int of nanoseconds from the registry's clock, got {value!r} "
            f"of type {type(value).__name__}"
        )
    out = int(value)
    if not -TIME_LIMIT <= out <= TIME_LIMIT:
        raise ValueError(f"{parameter} must be within 2**61 ns of zero, got {value!r}")
    return out


def salvage(flat: list[Any]) -> tuple[list[int], int]:
    """The valid (node, start, end) triplets of ``flat`` and the number of invalid ones dropped.

    The slow path of a drain, taken only when numpy could not read a batch at all.
    """
    good: list[int] = []
    bad = 0
    for i in range(0, len(flat) - len(flat) % 3, 3):
        triple = flat[i : i + 3]
        if all(type(v) is int and -TIME_LIMIT <= v <= TIME_LIMIT for v in triple):
            good += triple
        else:
            bad += 1
    return good, bad


_PREFIX = re.compile(r"[A-Za-z]*")
MAX_PREFIXES = 100


def name_prefix(name: str) -> str:
    """What drops past a cap are counted under: the letters a name starts with.

    >>> name_prefix("request-1234"), name_prefix("42")
    ('request', '(other)')
    """
    m = _PREFIX.match(name)
    prefix = m.group(0)[:40] if m else ""
    return prefix or "(other)"


class Fields:
    """Reads a parsed JSON document strictly: every getter checks the type and range of one field
    and raises ``ValueError`` naming its place (``series['step'].count``) and the bad value.

    >>> Fields("snapshot").integer({"count": -1}, "count", "series['a']")
    Traceback (most recent call last):
    ...
    ValueError: snapshot: series['a'].count must be an int >= 0, got -1
    """

    def __init__(self, what: str) -> None:
        self.what = what

    def fail(self, where: str, message: str) -> ValueError:
        return ValueError(f"{self.what}: {where} {message}")

    def mapping(self, value: object, where: str) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.fail(where, f"must be a JSON object, got {_short(value)}")
        return value

    def items(self, value: object, where: str) -> list[Any]:
        if not isinstance(value, list):
            raise self.fail(where, f"must be a JSON list, got {_short(value)}")
        return value

    def get(self, data: dict[str, Any], key: str, where: str, default: object = ...) -> Any:
        if key not in data:
            if default is ...:
                raise self.fail(f"{where}.{key}".lstrip("."), "is missing")
            return default
        return data[key]

    def integer(self, data: dict[str, Any], key: str, where: str = "", *, low: int | None = 0) -> int:
        value = self.get(data, key, where)
        ok = type(value) is int and -(2**63) < value < 2**63 and (low is None or value >= low)
        if not ok:
            bound = "" if low is None else f" >= {low}"
            raise self.fail(f"{where}.{key}".lstrip("."), f"must be an int{bound}, got {_short(value)}")
        return int(value)

    def number(self, data: dict[str, Any], key: str, where: str = "") -> float:
        value = self.get(data, key, where)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise self.fail(f"{where}.{key}".lstrip("."), f"must be a finite number, got {_short(value)}")
        return float(value)

    def text(self, data: dict[str, Any], key: str, where: str = "") -> str:
        value = self.get(data, key, where)
        if not isinstance(value, str):
            raise self.fail(f"{where}.{key}".lstrip("."), f"must be a string, got {_short(value)}")
        return value

    def column(self, data: dict[str, Any], key: str, where: str, kind: str = "i") -> Any:
        """A list of ints (``kind="i"``) or of finite numbers (``"f"``) as a numpy array."""
        import numpy as np

        value = self.items(self.get(data, key, where), f"{where}.{key}")
        if not value:
            return np.zeros(0, np.int64 if kind == "i" else np.float64)
        try:
            arr = np.array(value)
        except (ValueError, TypeError, OverflowError):
            arr = np.array([None])
        ok = arr.ndim == 1 and (arr.dtype.kind == "i" if kind == "i" else arr.dtype.kind in "if")
        if ok and kind == "f":
            arr = arr.astype(np.float64)
            ok = bool(np.isfinite(arr).all())
        if not ok:
            raise self.fail(
                f"{where}.{key}", f"must be a list of {'ints' if kind == 'i' else 'finite numbers'}"
            )
        return arr.astype(np.int64) if kind == "i" else arr


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
