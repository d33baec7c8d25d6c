"""Call contexts: where a record was made (which thread, inside which sections).

Every record carries one small integer, its *node*. A node is interned once per
distinct (enclosing node, name) pair, and the chain of enclosing nodes ends at
a *root* node that stands for one thread of one process. So a record's node
tells its thread, its process and its whole path of enclosing sections, while
the hot path only stores an int.

Which node is open right now is kept in a small list, the *cell*, held in a
``ContextVar``: ``cell[0]`` is the open node, ``cell[1]`` the cell's *owner*
(a thread's ident, or an asyncio task), open ``Section`` frames follow. An entry
point reads the cell, writes its own node and, on the way out, writes back the
node it read: two list subscripts, cheaper than pushing and popping a stack.

A context is copied when asyncio creates a task (or ``asyncio.to_thread`` runs a
function in another thread), and the copy holds the *same* list. A ``section``,
which may stay open across an ``await``, therefore checks the owner first and,
in a context that does not own its cell, starts a cell of its own that continues
from the open node (re-rooted under its own thread): each task and each thread
has its own stack. The check costs two attribute reads while no asyncio task runs
and the cell is a thread's (a thread's cell holds its ident, a task's the task);
only then does it ask asyncio and threading who is running. Plain ``@timed``
calls run to completion and do not check. What it cannot see: two threads
handed one *thread's* cell through copied contexts made outside any section
(``contextvars.copy_context().run`` in a thread pool) share its stack.

A path never holds a name twice: recursion folds. A call of a name already open on its path
(a recursive function, a section re-entered, ``a -> b -> a``) gets the *fold* node of the
deepest real node open (its *anchor*), an overlay node of series ``NAME.recursion``; a fold's
children are its anchor's, and a fold re-entered is itself. So a call path 3,000 deep is two
nodes, its records cost what a flat call's cost, the tree's totals count each outermost call
once (the re-entries' time is inside it), and the snapshot says where the fold is and how deep
it went (``Snapshot.recursion``). Real nodes never overlap their own records.

The table is bounded: past ``MAX_ROOTS`` threads, new threads share one root
(their records are kept, reported as one "other threads" row); past
``MAX_NODES`` nodes, new paths map to ``OVERFLOW``, whose records the registry
drops and counts. So a program that starts a thread per request, or names
sections after request ids, keeps a flat memory and a flat cost per record.
"""

from __future__ import annotations

import os
import sys
import threading
import weakref
from asyncio import current_task, tasks
from asyncio.events import _get_running_loop
from collections.abc import Callable, Sized
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from ._accel import configure
from .names import recursed_name, recursion_series

MAX_NODES = 200_000
"""Interned nodes per process; past it, new (parent, name) pairs become ``OVERFLOW``."""
MAX_ROOTS = 4096
"""Threads with a root of their own per process; later threads share the "other threads" root."""
OVERFLOW = 1
"""The node of every path interned past ``MAX_NODES``: its records are dropped and counted."""
OTHER_THREADS = "other threads"


@dataclass(frozen=True)
class ThreadInfo:
    """The thread (and process) a group of records came from.

    ``worker`` is the DataLoader worker id for records made in a worker process, else ``None``.
    """

    pid: int
    tid: int
    name: str
    worker: int | None = None

    @property
    def label(self) -> str:
        """A short human label, e.g. ``main/MainThread`` or ``worker 1 (pid 4242)``."""
        if self.worker is not None:
            return f"worker {self.worker} (pid {self.pid})"
        return f"pid {self.pid}/{self.name}"


class NodeTable:
    """The process-wide interning table of nodes.

    Reads on the hot path (``kids(name).get(parent)``) take no lock; interning a
    new node does. Node 0 is never handed out, so ``kids.get(parent) or ...``
    can fall back on a miss; node 1 is ``OVERFLOW``.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.names: list[str] = ["", ""]
        self.parents: list[int] = [0, 0]
        self.roots: list[int] = [0, 0]
        self._children: dict[str, dict[int, int]] = {}
        self._overlays: dict[str, dict[int, int]] = {}  # overlay nodes: never the same node as a section
        self._paths: dict[int, tuple[str, ...]] = {}
        self.threads: dict[int, ThreadInfo] = {}
        self.overlay: list[bool] = [False, False]
        """Per node: its records overlap their siblings (loop turns, GPU time), so the section tree
        leaves it out. Decided when the node is interned, by whoever interns it first."""
        self.folds: dict[int, int] = {}
        """Per fold node (a recursion, see the module docstring): its anchor, whose children it has."""
        self._root_by_thread: dict[ThreadInfo, int] = {}
        self._folded: int | None = None  # the root shared by threads past MAX_ROOTS
        self.max_nodes = MAX_NODES
        self.max_roots = MAX_ROOTS

    @property
    def full(self) -> bool:
        """Whether new paths now map to ``OVERFLOW``."""
        return len(self.names) >= self.max_nodes

    def kids(self, name: str, *, overlay: bool = False) -> dict[int, int]:
        """The parent-to-node map of ``name``; entry points keep it to skip a lookup per call."""
        table = self._overlays if overlay else self._children
        kids = table.get(name)
        if kids is None:
            if self.full:
                return {}  # a throwaway: child() interns nothing more, so nothing is cached in it
            with self._lock:
                kids = table.setdefault(name, {})
        return kids

    def child(self, parent: int, name: str, *, overlay: bool = False) -> int:
        """The node for ``name`` opened inside ``parent``, interned on first use.

        ``overlay`` marks records that overlap their siblings rather than nest (a loop turn spans
        the wait and the body; GPU time runs beside the host's; a stage's own timeline): the
        section tree leaves them out. An overlay node and a section of the same name in the same
        place are two nodes, so neither decides for the other. Past ``max_nodes``: ``OVERFLOW``.
        """
        kids = self.kids(name, overlay=overlay)
        node = kids.get(parent)
        if node is None:
            if parent == OVERFLOW or self.full:
                return OVERFLOW
            with self._lock:
                node = self._placed(parent, name, overlay)
        return node

    def _placed(self, parent: int, name: str, overlay: bool) -> int:
        """``child``'s node, with the lock held: found, interned, or a recursion folded."""
        kids = (self._overlays if overlay else self._children).setdefault(name, {})
        node = kids.get(parent)
        if node is not None:
            return node
        if overlay:
            node = self._intern(name, parent, self.roots[parent], True)
            if recursed_name(name) is not None:
                self.folds[node] = parent  # a fold (also one a DataLoader worker's batch names)
        else:
            anchor = self.folds.get(parent, parent)
            if name in self.path(anchor):
                node = self._placed(anchor, recursion_series(name), True)
            elif anchor != parent:
                node = self._placed(anchor, name, False)
            else:
                node = self._intern(name, parent, self.roots[parent], False)
        kids[parent] = node
        return node

    def _intern(self, name: str, parent: int, root: int, overlay: bool) -> int:
        node = len(self.names)
        self.names.append(name)
        self.parents.append(parent)
        self.roots.append(root or node)
        self.overlay.append(overlay)
        return node

    def root(self, thread: ThreadInfo) -> int:
        """The root node of ``thread``, interned on first use (the shared one past ``max_roots``)."""
        node = self._root_by_thread.get(thread)
        if node is None:
            with self._lock:
                node = self._root_by_thread.get(thread)
                if node is None:
                    if len(self._root_by_thread) >= self.max_roots:
                        return self._fold(thread.pid)
                    node = self._intern("", 0, 0, False)
                    self.threads[node] = thread
                    self._root_by_thread[thread] = node
        return node

    def _fold(self, pid: int) -> int:
        # Called with the lock held. Roots are not counted against max_nodes: there are at most
        # max_roots + 1 of them.
        folded = self._folded
        if folded is None or self.threads[folded].pid != pid:
            folded = self._folded = self._intern("", 0, 0, False)
            self.threads[folded] = ThreadInfo(pid=pid, tid=0, name=OTHER_THREADS)
        return folded

    def relabel(self, root: int, thread: ThreadInfo) -> None:
        """Say that root ``root`` stands for ``thread`` (a process that learns it is a worker after
        it started recording: what it recorded so far becomes the worker's too)."""
        with self._lock:
            old = self.threads[root]
            self._root_by_thread.pop(old, None)
            self._root_by_thread[thread] = root
            self.threads[root] = thread

    def path(self, node: int) -> tuple[str, ...]:
        """Names from the outermost enclosing section down to ``node`` (roots give ``()``)."""
        path = self._paths.get(node)
        if path is None:
            parent = self.parents[node]
            path = (*self.path(parent), self.names[node]) if parent else ()
            self._paths[node] = path
        return path

    def reroot(self, node: int, root: int) -> int:
        """The node of ``node``'s path of names under ``root`` (a thread continuing another's section)."""
        if self.overlay[node]:  # a fold: the same fold of the rerooted anchor
            return self.child(self.reroot(self.parents[node], root), self.names[node], overlay=True)
        out = root
        for name in self.path(node):
            out = self.child(out, name)
        return out

    def after_fork(self) -> None:
        # A lock held by another thread at fork time would never be released in the child.
        self._lock = threading.Lock()


NODES = NodeTable()
CELL: ContextVar[list[Any]] = ContextVar("perfkit_open_node")
"""The context's cell: ``[open node, owner, *open Section frames]``."""
get_cell: Callable[[None], list[Any] | None] = CELL.get
running_loop = _get_running_loop
get_ident = threading.get_ident
RUNNING_TASKS: Sized = (True,)
"""Non-empty while an asyncio task runs a step in any thread (asyncio's own table, where it keeps
one): a section checks whose its cell is only then, or when the cell is not a thread's. Where
asyncio keeps no such table (3.14 moved it into the thread state), always non-empty: always checked."""
_table = getattr(tasks, "_current_tasks", None)
if sys.version_info < (3, 14) and isinstance(_table, dict):
    RUNNING_TASKS = _table
configure(cell_var=CELL, running_tasks=RUNNING_TASKS)


def current_thread_info() -> ThreadInfo:
    thread = threading.current_thread()
    return ThreadInfo(pid=os.getpid(), tid=threading.get_ident(), name=thread.name)


def owner() -> object:
    """Who a cell belongs to here: the running asyncio task, else the thread (its ident)."""
    loop = running_loop()
    task = current_task(loop) if loop is not None else None
    return task if task is not None else get_ident()


def new_cell() -> list[Any]:
    """Give this context a cell of its own, holding the root of the current thread."""
    cell = [NODES.root(current_thread_info()), owner()]
    CELL.set(cell)
    _CELLS.add(cell)
    return cell


def own_cell(cell: list[Any] | None) -> list[Any]:
    """This context's cell, made now if it has none or shares its parent's (a task, a thread).

    The new cell continues from the open node of the one it replaces, under this thread's root.
    """
    me = owner()
    if cell is not None and cell[1] == me:
        return cell
    if cell is None:
        return new_cell()
    root = NODES.root(current_thread_info())
    node = cell[0]
    if NODES.roots[node] != root:
        node = NODES.reroot(node, root)
    mine = [node, me]
    CELL.set(mine)
    _CELLS.add(mine)
    return mine


class _Cells:
    """Every cell that may hold open frames, so that a generator resumed on another thread (or task)
    finds the frame its section left in the cell it was suspended in.

    Cells whose owner has ended and that hold no frame are dropped as new ones come, so a
    program that starts a thread per request keeps a bounded list.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cells: list[tuple[Callable[[], bool], list[Any]]] = []
        self._prune_at = 64

    def add(self, cell: list[Any]) -> None:
        alive = _alive_check()
        with self._lock:
            self._cells.append((alive, cell))
            if len(self._cells) >= self._prune_at:
                self._cells = [(a, c) for a, c in self._cells if len(c) > 2 or a()]
                self._prune_at = max(64, 2 * len(self._cells))

    def holding(self, owner_of_frame: object, skip: list[Any] | None) -> list[tuple[list[Any], int, bool]]:
        """(cell, index, owner alive) of every open frame of ``owner_of_frame`` outside ``skip``."""
        with self._lock:
            cells = list(self._cells)
        out = []
        for alive, cell in cells:
            if cell is skip:
                continue
            for i in range(len(cell) - 1, 1, -1):
                frame = cell[i] if i < len(cell) else None
                if frame is not None and frame[0] is owner_of_frame:
                    out.append((cell, i, alive()))
        return out

    def __len__(self) -> int:
        return len(self._cells)

    def after_fork(self, keep: list[Any] | None) -> None:
        self._lock = threading.Lock()
        self._cells = [(_alive_check(), keep)] if keep is not None else []


def _alive_check() -> Callable[[], bool]:
    """Whether the current owner (task or thread) is still running, asked later."""
    loop = running_loop()
    task = current_task(loop) if loop is not None else None
    if task is not None:
        ref_task = weakref.ref(task)
        return lambda: (t := ref_task()) is not None and not t.done()
    ref_thread = weakref.ref(threading.current_thread())
    return lambda: (t := ref_thread()) is not None and t.is_alive()


_CELLS = _Cells()


def _reset_after_fork() -> None:
    NODES.after_fork()
    cell = get_cell(None)
    if cell is not None:
        # Sections open in the parent are not open in the child: its records start at its own root.
        cell[:] = [NODES.root(current_thread_info()), get_ident()]
    _CELLS.after_fork(cell)


os.register_at_fork(after_in_child=_reset_after_fork)
