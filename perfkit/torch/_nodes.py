"""torchdata.nodes pipelines: records made in ``ParallelMapper`` workers reach the main process.

``instrument(loader_or_node, name)`` walks the node graph from the node (a ``Loader``'s root
node, a ``Batcher``'s source, ...) and wraps the map function of every parallel mapper:

* in a process worker (``method="process"``), each call is timed as ``NAME.data.fetch`` and its
  result travels back with the records made while producing it, as a DataLoader worker's batch
  does; the mapper's own ``next`` hands the records to the registry and passes the item on;
* in a thread worker (``method="thread"``), records go straight to the registry, labelled with
  the thread as a worker (``snap.by_worker`` counts them);
* inline (``num_workers=0``, ``Mapper``), calls run in the loop's thread, inside its wait.

This reads two attributes of torchdata's mapper implementation (``map_fn`` and ``next`` on the
node that runs the workers, torchdata 0.10-0.11), found by duck typing: a node that has a
``map_fn`` and a ``method``.
"""

from __future__ import annotations

import itertools
import os
import threading
from collections.abc import Callable, Iterator
from typing import Any

from .._registry import Registry, current_registry, registry_by_key, use_registry
from .._section import section
from ..names import fetch_series
from ._workers import LABELLED, Shipment, collect_records, deliver, label_worker, process_index

_THREAD_INDEX = itertools.count()
_LABELLED = threading.local()  # per thread: a thread started later may get a dead one's ident


def is_node(obj: object) -> bool:
    """Whether ``obj`` is a torchdata.nodes node or ``Loader`` (without importing torchdata)."""
    module = type(obj).__module__
    return module.startswith("torchdata.nodes") or any(
        c.__module__.startswith("torchdata.nodes") for c in type(obj).__mro__[1:]
    )


def instrument_nodes(obj: Any, name: str, registry: Registry | None) -> int:
    """Wrap the map function of every parallel mapper under ``obj``; returns how many."""
    wrapped = 0
    for node in _walk(obj):
        fn = getattr(node, "map_fn", None)
        if callable(fn) and hasattr(node, "method") and not isinstance(fn, NodeMapFn):
            node.map_fn = mapped = NodeMapFn(fn, name, os.getpid())
            node.next = _unwrapping(node.next, registry, mapped)
            node.reset = _telling(node.reset, registry, mapped)  # the workers start in reset()
            wrapped += 1
    return wrapped


def _walk(obj: Any) -> Iterator[Any]:
    """Every node reachable from ``obj`` through its attributes (sources, roots, inner nodes)."""
    seen: set[int] = set()
    todo = [obj]
    while todo:
        node = todo.pop()
        if id(node) in seen or not is_node(node):
            continue
        seen.add(id(node))
        yield node
        for value in vars(node).values():
            if isinstance(value, dict):
                todo += list(value.values())
            elif isinstance(value, (list, tuple)):
                todo += list(value)
            else:
                todo.append(value)


def _telling(reset: Callable[..., Any], registry: Registry | None, mapped: NodeMapFn) -> Callable[..., Any]:
    def reset_telling(*args: Any, **kwargs: Any) -> Any:
        mapped.registry = (registry or current_registry()).key
        return reset(*args, **kwargs)

    return reset_telling


def _unwrapping(
    next_item: Callable[[], Any], registry: Registry | None, mapped: NodeMapFn
) -> Callable[[], Any]:
    def next_unwrapped() -> Any:
        # Thread workers do not inherit the loop's context: tell them its registry, item by item.
        mapped.registry = (registry or current_registry()).key
        item = next_item()
        return deliver(item, registry) if type(item) is Shipment else item

    return next_unwrapped


class NodeMapFn:
    """A mapper's function, timed as ``NAME.data.fetch``; from a process worker its result travels
    with the records made while producing it. Picklable (a spawned worker gets a copy)."""

    def __init__(self, fn: Callable[[Any], Any], name: str, main_pid: int) -> None:
        self.fn = fn
        self.name = name
        self.main_pid = main_pid
        self.registry: tuple[int, int] | None = None  # the loop's registry (set by the mapper's next)

    def __call__(self, item: Any) -> Any:
        if os.getpid() != self.main_pid:  # a process worker
            if not LABELLED:
                LABELLED.append(True)
                label_worker(process_index(), forward=True)
            with section(fetch_series(self.name)):
                out = self.fn(item)
            return Shipment(out, collect_records())
        if threading.current_thread() is not threading.main_thread() and not getattr(
            _LABELLED, "done", False
        ):
            _LABELLED.done = True
            label_worker(next(_THREAD_INDEX), forward=False)  # a thread worker: its own root
        reg = registry_by_key(self.registry) if self.registry is not None else None
        if reg is None:
            with section(fetch_series(self.name)):
                return self.fn(item)
        with use_registry(reg), section(fetch_series(self.name)):  # the user's sections in it too
            return self.fn(item)
