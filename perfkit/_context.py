"""Call contexts: where a record was made (which thread, inside which sections).

Every record carries one small integer, its *node*. A node is interned once per
distinct (enclosing node, name) pair, and the chain of enclosing nodes ends at
a *root* node that stands for one thread of one process. So a record's node
tells its thread, its process and its whole path of enclosing sections, while
the hot path only stores an int.

Which node is open right now is kept in a one-item list, the *cell*, held in a
``ContextVar``: each thread gets its own cell, and an ``@timed`` coroutine
gives its task a new one, so records made in concurrent tasks get the right
parent. An entry point reads the cell, writes its own node and, on the way
out, writes back the node it read: two list subscripts, cheaper than pushing
and popping a stack, and self-healing if a generator suspends inside a section.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any


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
    can fall back on a miss.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.names: list[str] = [""]
        self.parents: list[int] = [0]
        self.roots: list[int] = [0]
        self._children: dict[str, dict[int, int]] = {}
        self._overlays: dict[str, dict[int, int]] = {}  # overlay nodes: never the same node as a section
        self._paths: dict[int, tuple[str, ...]] = {}
        self.threads: dict[int, ThreadInfo] = {}
        self.overlay: list[bool] = [False]
        """Per node: its records overlap their siblings (loop turns, GPU time), so the section tree
        leaves it out. Decided when the node is interned, by whoever interns it first."""
        self._root_by_thread: dict[ThreadInfo, int] = {}

    def kids(self, name: str, *, overlay: bool = False) -> dict[int, int]:
        """The parent-to-node map of ``name``; entry points keep it to skip a lookup per call."""
        table = self._overlays if overlay else self._children
        kids = table.get(name)
        if kids is None:
            with self._lock:
                kids = table.setdefault(name, {})
        return kids

    def child(self, parent: int, name: str, *, overlay: bool = False) -> int:
        """The node for ``name`` opened inside ``parent``, interned on first use.

        ``overlay`` marks records that overlap their siblings rather than nest (a loop turn spans
        the wait and the body; GPU time runs beside the host's; a stage's own timeline): the
        section tree leaves them out. An overlay node and a section of the same name in the same
        place are two nodes, so neither decides for the other.
        """
        kids = self.kids(name, overlay=overlay)
        node = kids.get(parent)
        if node is None:
            with self._lock:
                node = kids.get(parent)
                if node is None:
                    node = len(self.names)
                    self.names.append(name)
                    self.parents.append(parent)
                    self.roots.append(self.roots[parent])
                    self.overlay.append(overlay)
                    kids[parent] = node
        return node

    def root(self, thread: ThreadInfo) -> int:
        """The root node of ``thread``, interned on first use."""
        node = self._root_by_thread.get(thread)
        if node is None:
            with self._lock:
                node = self._root_by_thread.get(thread)
                if node is None:
                    node = len(self.names)
                    self.names.append("")
                    self.parents.append(0)
                    self.roots.append(node)
                    self.overlay.append(False)
                    self.threads[node] = thread
                    self._root_by_thread[thread] = node
        return node

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

    def after_fork(self) -> None:
        # A lock held by another thread at fork time would never be released in the child.
        self._lock = threading.Lock()


NODES = NodeTable()
CELL: ContextVar[list[Any]] = ContextVar("perfkit_open_node")
"""The context's cell: ``cell[0]`` is the innermost open node; open ``Section`` frames follow it."""
get_cell: Callable[[None], list[Any] | None] = CELL.get


def current_thread_info() -> ThreadInfo:
    thread = threading.current_thread()
    return ThreadInfo(pid=os.getpid(), tid=threading.get_ident(), name=thread.name)


def new_cell() -> list[Any]:
    """Give this context a cell, holding the root of the current thread."""
    cell = [NODES.root(current_thread_info())]
    CELL.set(cell)
    return cell


def _reset_after_fork() -> None:
    NODES.after_fork()
    cell = get_cell(None)
    if cell is not None:
        # Sections open in the parent are not open in the child: its records start at its own root.
        cell[:] = [NODES.root(current_thread_info())]


os.register_at_fork(after_in_child=_reset_after_fork)
