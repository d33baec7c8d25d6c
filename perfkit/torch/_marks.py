"""What a profiler window adds to the trace: perfkit's sections, and the parts of the step.

While a window records, a ``RangeTracer`` is perfkit's tracer: every section
and ``@timed`` call opens a ``record_function`` range under its own name, and
a loader's wait becomes ``perfkit.part.data_wait``. A module's step methods
(``training_step`` ..., as a LightningModule has them), ``backward`` and
``optimizer_step`` are wrapped for the window only, as ``perfkit.part.forward`` /
``backward`` / ``optimizer`` ranges (the names are ``perfkit.names``'),
so ``perfkit analyze`` can split each step into parts. Outside windows nothing
is wrapped and no range is opened (one costs about 8 µs even unrecorded).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from torch.autograd.profiler import record_function

from ..names import MARK_BACKWARD, MARK_DATA_WAIT, MARK_FORWARD, MARK_OPTIMIZER, WAIT

_STEP_METHODS = ("training_step", "validation_step", "test_step", "predict_step")


class RangeTracer:
    """perfkit's tracer during a window; remembers the section names it saw, for the trace's metadata."""

    def __init__(self) -> None:
        self.sections: set[str] = set()

    def begin(self, name: str) -> object:
        if name.endswith(WAIT):
            name = MARK_DATA_WAIT
        else:
            self.sections.add(name)
        handle = record_function(name)
        enter: Callable[[], object] = handle.__enter__  # untyped in torch
        enter()
        return handle

    def end(self, handle: object) -> None:
        if isinstance(handle, record_function):
            handle.__exit__(None, None, None)


def _marked(method: Callable[..., Any], name: str) -> Callable[..., Any]:
    @functools.wraps(method)
    def marked(*args: Any, **kwargs: Any) -> Any:
        with record_function(name):
            return method(*args, **kwargs)

    return marked


def mark_parts(module: Any) -> Callable[[], None]:
    """Wrap ``module``'s step methods, ``backward`` and ``optimizer_step`` as part ranges; returns undo."""
    wrapped = []
    targets = [
        *((m, MARK_FORWARD) for m in _STEP_METHODS),
        ("backward", MARK_BACKWARD),
        ("optimizer_step", MARK_OPTIMIZER),
    ]
    for attr, name in targets:
        method = getattr(module, attr, None)
        if callable(method) and attr not in vars(module):
            setattr(module, attr, _marked(method, name))
            wrapped.append(attr)

    def undo() -> None:
        for attr in wrapped:
            vars(module).pop(attr, None)  # the class's own method shows through again

    return undo
