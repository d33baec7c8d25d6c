"""Types of the optional compiled hot path (perfkit/_speedups.c); see perfkit/_accel.py."""

from collections.abc import Callable
from typing import Any

class Switch:
    on: bool
    tracer: Any
    def __init__(self, on: bool = True) -> None: ...

class RegistryCore:
    _buf: list[int]
    clock: Callable[[], int]
    @property
    def pending(self) -> int: ...
    def _take_pending(self) -> tuple[list[int], bytes, bytes]: ...

class TimedFunction:
    _series: str
    def __init__(
        self,
        fn: Callable[..., Any],
        name: str,
        registry: Any,
        kids: dict[int, int],
        slow: Callable[..., Any],
    ) -> None: ...
    def __call__(self, *args: Any, **kwargs: Any) -> Any: ...

class SectionCore:
    name: str
    _registry: Any
    _kids: dict[int, int]
    def __enter__(self) -> Any: ...
    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None: ...

class IterCore:
    name: str
    _it: Any
    _last: int | None
    _registry: Any
    _source: Any
    _wait: str
    _turn: str
    _wait_kids: dict[int, int]
    _turn_kids: dict[int, int]
    def __next__(self) -> Any: ...

def configure(**objects: object) -> None: ...
def ready() -> bool: ...

class SectionLookup:
    def __init__(
        self, by_name: dict[str, Any], by_registry: dict[Any, dict[str, Any]], slow: Callable[..., Any]
    ) -> None: ...
    def __call__(self, *args: Any, **kwargs: Any) -> Any: ...
