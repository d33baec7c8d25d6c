"""``section``: time a block as one record, nested in whatever section encloses it.

    with perfkit.section("postprocess"):
        ...

    load = perfkit.section("load")      # or keep one and reuse it: it holds no state
    with load:
        ...

A ``Section`` keeps no timing state of its own: each ``with`` pushes its frame
(parent, node, registry, start) onto the context's cell and pops it on exit.
So ``section(name)`` can hand out one cached object per name, the same object
can be re-entered and used from several threads at once, and a block costs no
object construction. A block may stay open across an ``await``: it first makes
sure the cell is its task's own (see ``_context``), so tasks started inside a
section nest under it and never into each other.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from types import TracebackType
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar, cast

from ._accel import SPEEDUPS, configure
from ._buffer import DRAIN_AT
from ._context import _CELLS, NODES, RUNNING_TASKS, get_cell, new_cell, own_cell
from ._gpu_events import torch_events, warn_no_cuda
from ._registry import Registry, check_registry, current_registry
from ._state import SWITCH
from ._timing import _decorate
from ._validate import check_name
from .names import gpu_series

F = TypeVar("F", bound=Callable[..., Any])
S = TypeVar("S", bound="_PySection")


class _PySection:
    """A section's fields and its ``with`` (compiled in ``_speedups`` where it is built, which hands
    every case but the common one to these methods)."""

    __slots__ = ("_kids", "_registry", "name")

    name: str
    _registry: Registry | None
    _kids: dict[int, int]

    def __enter__(self: S) -> S:
        if not SWITCH.on:
            return self
        reg = self._registry or current_registry()
        cell = get_cell(None)
        # A cell shared with another task or thread (a copied context) is not ours to push on:
        # asked only while a task runs somewhere, or when the cell is a task's (see _context).
        if cell is None or RUNNING_TASKS or cell[1].__class__ is not int:
            cell = own_cell(cell)
        parent = cell[0]
        node = self._kids.get(parent) or NODES.child(parent, self.name)
        tracer = SWITCH.tracer
        trace = None if tracer is None else (tracer, tracer.begin(self.name))
        t0 = reg.clock()  # before the cell changes: a clock that raises leaves it as it was
        cell[0] = node
        cell.append((self, parent, node, reg, t0, trace, None))
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        cell: list[Any] | None = get_cell(None)
        if cell is not None and len(cell) > 2:
            frame = cell.pop()
            if frame[0] is self:
                _, parent, node, reg, t0, trace, _ = frame
                cell[0] = parent
                t1 = reg.clock()
            else:
                cell.append(frame)
                # A generator suspended inside a section of its own can leave its frame above
                # ours; find ours so that no record is lost.
                t1 = _now(frame)
                found = _pop_frame(cell, self) or _adopt_frame(self, cell)
                if found is None:
                    return
                _, parent, node, reg, t0, trace, _ = found
        else:
            if not SWITCH.on:
                return  # entered while perfkit was disabled
            found = _adopt_frame(self, cell)  # a generator resumed in another thread or task
            if found is None:
                return
            _, parent, node, reg, t0, trace, _ = found
            t1 = reg.clock()
        if trace is not None:
            trace[0].end(trace[1])
        buf = reg._buf
        buf += (node if exc_type is None else ~node, t0, t1)
        if len(buf) > DRAIN_AT:
            reg.drain()


if TYPE_CHECKING:
    _SectionCore = _PySection
else:
    _SectionCore = _PySection if SPEEDUPS is None else SPEEDUPS.SectionCore
configure(section_enter=_PySection.__enter__, section_exit=_PySection.__exit__)


class Section(_SectionCore):
    """A named block timer; ``section(name)`` returns one. Use it with ``with`` or as a decorator.

    The object holds no timing state: each ``with`` keeps its frame (parent, node, start, trace)
    on the current context's cell, so one ``Section`` can be entered recursively and from
    several threads at once, and ``section()`` can hand out a cached object instead of
    building a new one per block.
    """

    __slots__ = ()

    def __init__(self, name: str, registry: Registry | None) -> None:
        self.name = name
        self._registry = registry
        self._kids = NODES.kids(name)

    def __repr__(self) -> str:
        return f"section({self.name!r})"

    def __reduce__(self) -> tuple[Callable[..., Section], tuple[str, Registry | None, bool]]:
        # By name: the copy in another process (a spawn-started worker) interns its nodes there.
        return (_section_again, (self.name, self._registry, self._cuda))

    _cuda: ClassVar[bool] = False

    def __call__(self, fn: F) -> F:
        """Decorate ``fn``: each call is recorded under this section's name (thread-safe)."""
        return cast(F, _decorate(fn, self.name, self._registry, self._cuda))


class CudaSection(Section):
    """A section that also records its GPU time (``NAME.gpu``) with CUDA events."""

    __slots__ = ()
    _cuda: ClassVar[bool] = True

    def __enter__(self) -> CudaSection:
        if not SWITCH.on:
            return self
        reg = self._registry or current_registry()
        events = reg.gpu_events or torch_events()
        if events is None:
            warn_no_cuda(self.name)
            Section.__enter__(self)
            return self
        Section.__enter__(self)
        cell: list[Any] = get_cell(None) or new_cell()
        start = events()
        start.record()
        cell[-1] = (*cell[-1][:6], (events, start))
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        cell = get_cell(None)
        frame = _find_frame(cell, self) if cell else None
        if frame is None or frame[6] is None:
            Section.__exit__(self, exc_type, exc, tb)
            return
        _, parent, _, reg, t0, _, (events, start) = frame
        end = events()
        end.record()
        Section.__exit__(self, exc_type, exc, tb)
        gpu_node = NODES.child(parent, gpu_series(self.name), overlay=True)
        reg._gpu.add(gpu_node, t0, start, end, exc_type is not None)


def _frame_index(cell: list[Any], owner: _PySection) -> int | None:
    """Where ``owner``'s innermost open frame is in ``cell`` (frames follow the node and owner)."""
    for i in range(len(cell) - 1, 1, -1):
        if cell[i][0] is owner:
            return i
    return None


def _find_frame(cell: list[Any], owner: _PySection) -> tuple[Any, ...] | None:
    i = _frame_index(cell, owner)
    frame: tuple[Any, ...] | None = None if i is None else cell[i]
    return frame


def _now(frame: tuple[Any, ...]) -> int:
    clock: Callable[[], int] = frame[3].clock
    return clock()


def _pop_frame(cell: list[Any], owner: _PySection, index: int | None = None) -> tuple[Any, ...] | None:
    i = _frame_index(cell, owner) if index is None else index
    if i is None:
        return None
    frame: tuple[Any, ...] = cell.pop(i)
    # Frames opened inside ours but still open will restore our parent, not our node.
    for j in range(i, len(cell)):
        above = cell[j]
        if above[1] == frame[2]:
            cell[j] = (above[0], frame[1], *above[2:])
    return frame


def _adopt_frame(owner: _PySection, cell: list[Any] | None) -> tuple[Any, ...] | None:
    """``owner``'s frame from the cell of another thread or task: a generator suspended inside its
    section there and resumed here. Where several could be it, the frame of an ended thread or
    task is taken first, then the oldest; that cell's open node goes back to the frame's parent."""
    found = _CELLS.holding(owner, skip=cell)
    if not found:
        return None
    other, i, _ = min(found, key=lambda f: (f[2], f[0][f[1]][4]))
    try:
        if other[i][0] is not owner:
            return None  # its owner closed it meanwhile
        frame = _pop_frame(other, owner, i)
    except IndexError:
        return None
    if frame is not None and other[0] == frame[2]:
        other[0] = frame[1]
    return frame


def _section_again(name: str, registry: Registry | None, cuda: bool) -> Section:
    return section(name, registry=registry, cuda=cuda)


_CACHE: dict[tuple[str, Registry | None, bool], Section] = {}
_BY_NAME: dict[str, Section] = {}  # the (name, None) entries of _CACHE, found without a tuple
_BY_REGISTRY: dict[Registry, dict[str, Section]] = {}  # the (name, registry) ones, likewise
_CACHE_MAX = 4096


def section(name: str, *, registry: Registry | None = None, cuda: bool = False) -> Section:
    """Time a block as one record of series ``name``; also usable as a decorator.

    Sections nest: a record made inside knows this section as its parent. A block that
    raises is recorded with its error flag set, and the exception propagates unchanged.

    >>> import perfkit
    >>> reg = perfkit.Registry()
    >>> with perfkit.section("epoch", registry=reg):
    ...     with perfkit.section("batch", registry=reg):
    ...         pass
    >>> sorted(reg.snapshot().tree)
    [('epoch',), ('epoch', 'batch')]

    With ``cuda=True`` the block's GPU time is recorded too, as ``NAME.gpu``, from CUDA events
    on the current stream resolved lazily (no ``torch.cuda.synchronize()`` per block).
    """
    if not cuda:
        try:
            cached = _BY_NAME.get(name) if registry is None else _BY_REGISTRY[registry].get(name)
        except KeyError:
            cached = None
        except TypeError:  # unhashable: the checks below say what it should be
            check_name(name)
            check_registry(registry)
            raise
        if cached is not None:
            return cached
    key = (name, registry, cuda)
    try:
        return _CACHE[key]
    except (KeyError, TypeError):
        pass
    check_name(name)
    check_registry(registry)
    if len(_CACHE) >= _CACHE_MAX:  # names built at run time must not grow the cache forever
        _CACHE.clear()
        _BY_NAME.clear()
        _BY_REGISTRY.clear()
    obj = _CACHE[key] = (CudaSection if cuda else Section)(name, registry)
    if not cuda:
        if registry is None:
            _BY_NAME[name] = obj
        else:
            _BY_REGISTRY.setdefault(registry, {})[name] = obj
    return obj


if not TYPE_CHECKING and SPEEDUPS is not None:
    # The common call, a name already cached, is answered in C from the same dictionaries.
    section = functools.update_wrapper(SPEEDUPS.SectionLookup(_BY_NAME, _BY_REGISTRY, section), section)
