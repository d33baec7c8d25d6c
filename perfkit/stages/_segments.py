"""``Window``: a window that can be paused, e.g. a training epoch around its validation runs.

Lightning runs validation inside the training epoch; the training epoch's
numbers must not include it. A ``Window`` is a list of segments: ``pause()``
closes the current one (a snapshot since its cursor), ``resume()`` opens the
next, ``close()`` merges them. Merging snapshots of one registry's disjoint
windows is exact, as it is across processes.
"""

from __future__ import annotations

from .._registry import Cursor, Registry
from .._snapshot import Snapshot


class Window:
    """Records of ``registry`` between ``Window()`` and ``close()``, minus the paused stretches.

    >>> import perfkit
    >>> reg = perfkit.Registry()
    >>> from perfkit.stages import Window
    >>> train = Window(reg)
    >>> with perfkit.section("train.step", registry=reg):
    ...     pass
    >>> train.pause()
    >>> with perfkit.section("val.step", registry=reg):  # not part of the training window
    ...     pass
    >>> train.resume()
    >>> sorted(train.close())
    ['train.step']
    """

    def __init__(self, registry: Registry) -> None:
        if not isinstance(registry, Registry):
            raise TypeError(f"registry must be a perfkit.Registry, got {registry!r}")
        self.registry = registry
        self._parts: list[Snapshot] = []
        self._cursor: Cursor | None = registry.cursor()

    @property
    def open(self) -> bool:
        """Whether records made now belong to the window (it is neither paused nor closed)."""
        return self._cursor is not None

    def pause(self) -> None:
        """Stop counting records until ``resume()``; pausing a paused window does nothing."""
        if self._cursor is not None:
            self._parts.append(self.registry.snapshot(since=self._cursor))
            self._cursor = None

    def resume(self) -> None:
        """Count records again; resuming an open window does nothing."""
        if self._cursor is None:
            self._cursor = self.registry.cursor()

    def close(self) -> Snapshot:
        """The merged snapshot of every segment (the window may be resumed again afterwards)."""
        self.pause()
        return self._parts[0].merge(*self._parts[1:]) if len(self._parts) > 1 else self._parts[0]

    @property
    def segments(self) -> tuple[tuple[int, int], ...]:
        """The closed segments' (start, end) in the registry's clock's ns: when records counted."""
        return tuple((p.start_ns, p.end_ns) for p in self._parts)

    @property
    def wall_s(self) -> float:
        """Seconds the window has been open, pauses excluded (closed segments only)."""
        return sum(p.duration_s for p in self._parts)
