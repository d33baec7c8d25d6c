"""Argument checks shared by the entry points: fail at construction, naming the parameter."""

from __future__ import annotations


def check_name(name: object, parameter: str = "name") -> str:
    if not isinstance(name, str):
        raise TypeError(f"{parameter} must be a non-empty str, got {name!r} of type {type(name).__name__}")
    if not name:
        raise ValueError(f"{parameter} must be a non-empty str, got {name!r}")
    return name
