"""``Segments``: a stage epoch's records as stretches that can be paused, e.g. a training epoch
around the validation runs inside it.

Lightning runs validation inside the training epoch; the training epoch's
numbers must not include it. ``Segments`` keeps the stretches in which records
count: ``pause()`` closes the current one (a snapshot since its cursor),
``resume()`` opens the next, ``close()`` merges them into the epoch's one
snapshot. Merging snapshots of one registry's disjoint windows is exact, as it
is across processes.
"""

from __future__ import annotations

from .._registry import Cursor, Registry
from .._snapshot import Snapshot


class Segments:
    """Records of ``registry`` between ``Segments()`` and ``close()``, minus the paused stretches.

    >>> import perfkit
    >>> reg = perfkit.Registry()
    >>> from perfkit.stages import Segments
    >>> train = Segments(reg)
    >>> with perfkit.section("train.step", registry=reg):
    ...     pass
    >>> train.pause()
    >>> with perfkit.section("val.step", registry=reg):  # not part of the training epoch
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
        """Whether records made now count (the segments are neither paused nor closed)."""
        return self._cursor is not None

    def pause(self) -> None:
        """Stop counting records until ``resume()``; pausing when paused does nothing."""
        if self._cursor is not None:
            self._parts.append(self.registry.snapshot(since=self._cursor))
            self._cursor = None

    def resume(self) -> None:
        """Count records again; resuming when open does nothing."""
        if self._cursor is None:
            self._cursor = self.registry.cursor()

    def close(self) -> Snapshot:
        """The merged snapshot of every segment (counting may be resumed again afterwards)."""
        self.pause()
        return self._parts[0].merge(*self._parts[1:]) if len(self._parts) > 1 else self._parts[0]

    @property
    def segments(self) -> tuple[tuple[int, int], ...]:
        """The closed segments' (start, end) in the registry's clock's ns: when records counted."""
        return tuple((p.start_ns, p.end_ns) for p in self._parts)

    @property
    def wall_s(self) -> float:
        """Seconds the records counted, pauses excluded (closed segments only)."""
        return sum(p.duration_s for p in self._parts)
