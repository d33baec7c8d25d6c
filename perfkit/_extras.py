"""Optional dependencies, imported where they are used, with an error that names the extra.

perfkit's core needs numpy and psutil only; torch, wandb, mlflow, matplotlib and pynvml are
imported the first time a feature needs them, so ``import perfkit`` stays cheap and a missing
package is reported by the feature that wanted it, with the ``pip install`` line that brings it.

    >>> import_extra("json", "none", "a doctest").__name__
    'json'
"""

from __future__ import annotations

import importlib
from types import ModuleType


def import_extra(module: str, extra: str, who: str) -> ModuleType:
    """``import module``, or an ImportError that says which perfkit extra brings it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ImportError(f"{who} needs {module}: pip install 'perfkit[{extra}]'") from exc
