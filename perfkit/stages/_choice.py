"""Which stages a component follows: the one check of a ``stages=`` argument, for every integration."""

from __future__ import annotations

from collections.abc import Iterable

from ..names import STAGES


def check_stages(
    value: object, name: str = "stages", *, among: Iterable[str] | None = STAGES
) -> tuple[str, ...]:
    """``value``, a list of stage names each one of ``among``, as a tuple; refused naming ``name``.

    A string or a value that is not a collection is a ``TypeError``; a name not in ``among`` is a
    ``ValueError``. ``among=None`` takes any non-empty name (a plain script names its own stages,
    as ``perfkit.window`` lets it).

    >>> check_stages(["train", "val"])
    ('train', 'val')
    >>> check_stages(["train", "eval"], "profile_stages")
    Traceback (most recent call last):
    ...
    ValueError: profile_stages: unknown stage 'eval', expected some of ['train', 'val', 'test', 'predict']
    >>> check_stages("val", among=("train", "val", "test"))
    Traceback (most recent call last):
    ...
    TypeError: stages must be a list of stage names, got 'val'
    """
    if isinstance(value, str) or not isinstance(value, Iterable):
        raise TypeError(f"{name} must be a list of stage names, got {value!r}")
    out = tuple(value)
    allowed = None if among is None else tuple(among)
    for stage in out:
        if allowed is None and (not isinstance(stage, str) or not stage):
            raise ValueError(f"{name}: stage names are non-empty strings, got {stage!r}")
        if allowed is not None and stage not in allowed:
            raise ValueError(f"{name}: unknown stage {stage!r}, expected some of {list(allowed)}")
    return out
