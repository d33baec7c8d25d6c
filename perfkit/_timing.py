"""``@timed``: time every call of a function into a registry.

    @perfkit.timed                      # name "module.qualname"
    def collate(batch): ...

    @perfkit.timed("unclip")            # or timed(name=..., registry=...)
    def unclip(box): ...


Timing state lives in the call (locals of the wrapper, or the section object
for one ``with``), never on the decorator, so recursion and threads are safe.
The switch, the registry and the clock are looked up when the function is
*called*, so a decorator applied at import time follows later changes.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import AsyncGenerator, Callable, Coroutine, Generator
from typing import Any, ParamSpec, TypeVar, cast, overload

from ._accel import SPEEDUPS
from ._buffer import DRAIN_AT, add_record
from ._context import CELL, NODES, get_cell, new_cell, owner
from ._cuda import wrap_cuda_function
from ._registry import Registry, check_registry, current_registry
from ._state import SWITCH
from ._validate import check_name

P = ParamSpec("P")
R = TypeVar("R")


@overload
def timed(fn: Callable[P, R], /) -> Callable[P, R]: ...
@overload
def timed(
    name: str | None = None, /, *, registry: Registry | None = None, cuda: bool = False
) -> Callable[[Callable[P, R]], Callable[P, R]]: ...
@overload
def timed(
    *, name: str | None = None, registry: Registry | None = None, cuda: bool = False
) -> Callable[[Callable[P, R]], Callable[P, R]]: ...


def timed(
    fn_or_name: Callable[P, R] | str | None = None,
    /,
    *,
    name: str | None = None,
    registry: Registry | None = None,
    cuda: bool = False,
) -> Callable[P, R] | Callable[[Callable[P, R]], Callable[P, R]]:
    """Record every call of the decorated function as one record of series ``name``.

    Works on functions, methods, ``async def`` (time until the coroutine completes) and
    generator functions (time spent running inside the generator, not while it is
    suspended). The wrapper keeps the signature, ``__wrapped__``, name and docstring.
    With ``cuda=True`` (plain functions) the GPU time of the call is also recorded, as
    ``NAME.gpu``, from CUDA events resolved lazily (no synchronisation per call).

    >>> import perfkit
    >>> reg = perfkit.Registry()
    >>> @perfkit.timed("square", registry=reg)
    ... def square(x: int) -> int:
    ...     return x * x
    >>> square(3), reg.snapshot()["square"].count
    (9, 1)
    """
    check_registry(registry)
    if callable(fn_or_name) or isinstance(fn_or_name, (staticmethod, classmethod)):
        if name is not None:
            check_name(name)
        return _decorate(fn_or_name, name, registry, cuda)
    if fn_or_name is not None:
        if name is not None:
            raise TypeError(f"give the name once, positionally or as name=, got {fn_or_name!r} and {name!r}")
        name = check_name(fn_or_name)
    elif name is not None:
        check_name(name)

    def decorator(fn: Callable[P, R]) -> Callable[P, R]:
        return _decorate(fn, name, registry, cuda)

    return decorator


def _decorate(
    fn: Callable[P, R], name: str | None, registry: Registry | None, cuda: bool = False
) -> Callable[P, R]:
    if isinstance(fn, (staticmethod, classmethod)):
        inner = _decorate(fn.__func__, name or _default_name(fn.__func__), registry, cuda)
        return cast(Callable[P, R], type(fn)(inner))
    if not callable(fn):
        raise TypeError(f"timed() needs a callable, got {fn!r}")
    series = name or _default_name(fn)
    if cuda:
        if (
            inspect.isasyncgenfunction(fn)
            or inspect.iscoroutinefunction(fn)
            or inspect.isgeneratorfunction(fn)
        ):
            raise ValueError(f"cuda=True times plain functions; {fn!r} is a coroutine or generator function")
        wrapper: Callable[..., Any] = wrap_cuda_function(fn, series, registry)
    elif inspect.isasyncgenfunction(fn):
        wrapper = _wrap_async_generator(fn, series, registry)
    elif inspect.iscoroutinefunction(fn):
        wrapper = _wrap_coroutine(fn, series, registry)
    elif inspect.isgeneratorfunction(fn):
        wrapper = _wrap_generator(fn, series, registry)
    else:
        wrapper = _wrap_function(fn, series, registry)
    return cast(Callable[P, R], functools.update_wrapper(wrapper, fn))


def _default_name(fn: Callable[..., Any]) -> str:
    """``module.qualname``; a script's functions are ``__main__.f`` in every process, including
    spawned DataLoader workers, where multiprocessing imports the script as ``__mp_main__``."""
    module = getattr(fn, "__module__", None) or "<unknown>"
    if module == "__mp_main__":
        module = "__main__"
    qualname = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)
    return f"{module}.{qualname}"


def _wrap_function(fn: Callable[..., R], name: str, registry: Registry | None) -> Callable[..., R]:
    kids = NODES.kids(name)
    child = NODES.child
    switch = SWITCH

    def timed_call(*args: Any, **kwargs: Any) -> R:
        if not switch.on:
            return fn(*args, **kwargs)
        if switch.tracer is not None:
            return _traced_call(fn, name, registry, args, kwargs)
        reg = registry or current_registry()
        cell = get_cell(None) or new_cell()
        parent = cell[0]
        try:
            node = kids[parent]  # a subscript: cheaper than .get() when it hits, as it nearly always does
        except KeyError:
            node = child(parent, name)
        clock = reg.clock
        t0 = clock()
        cell[0] = node
        try:
            result = fn(*args, **kwargs)
        except BaseException:
            cell[0] = parent
            add_record(reg, node, t0, clock(), failed=True)
            raise
        cell[0] = parent
        t1 = clock()
        buf = reg._buf
        buf += (node, t0, t1)
        if len(buf) > DRAIN_AT:
            reg.drain()
        return result

    if SPEEDUPS is None:
        return timed_call
    # The compiled wrapper takes the common call and hands every other one to timed_call.
    compiled: Callable[..., R] = SPEEDUPS.TimedFunction(fn, name, registry, kids, timed_call)
    return compiled


def _traced_call(fn: Callable[..., R], name: str, registry: Registry | None, args: Any, kwargs: Any) -> R:
    """``timed_call`` inside a profiler window: the call is also a named range of the trace."""
    tracer = SWITCH.tracer
    handle = tracer.begin(name) if tracer is not None else None
    reg = registry or current_registry()
    cell = get_cell(None) or new_cell()
    parent = cell[0]
    node = NODES.child(parent, name)
    cell[0] = node
    t0 = reg.clock()
    failed = True
    try:
        result = fn(*args, **kwargs)
        failed = False
        return result
    finally:
        t1 = reg.clock()
        cell[0] = parent
        if tracer is not None:
            tracer.end(handle)
        add_record(reg, node, t0, t1, failed=failed)


def _wrap_coroutine(
    fn: Callable[..., Coroutine[Any, Any, R]], name: str, registry: Registry | None
) -> Callable[..., Coroutine[Any, Any, R]]:
    async def timed_coroutine(*args: Any, **kwargs: Any) -> R:
        if not SWITCH.on:
            return await fn(*args, **kwargs)
        reg = registry or current_registry()
        outer = get_cell(None) or new_cell()
        node = NODES.child(outer[0], name)
        # A cell of its own: other tasks interleaving on this thread must not see our sections.
        token = CELL.set([node, owner()])
        t0 = reg.clock()
        failed = True
        try:
            result = await fn(*args, **kwargs)
            failed = False
            return result
        finally:
            add_record(reg, node, t0, reg.clock(), failed=failed)
            CELL.reset(token)

    return timed_coroutine


def _wrap_generator(
    fn: Callable[..., Generator[Any, Any, R]], name: str, registry: Registry | None
) -> Callable[..., Generator[Any, Any, R]]:
    def timed_generator(*args: Any, **kwargs: Any) -> Generator[Any, Any, R]:
        gen = fn(*args, **kwargs)
        if not SWITCH.on:
            return (yield from gen)
        reg = registry or current_registry()
        run = _GeneratorRun(name, reg)
        value: Any = None
        thrown: BaseException | None = None
        while True:
            run.resume()
            try:
                item = gen.send(value) if thrown is None else gen.throw(thrown)
            except StopIteration as stop:
                run.finish(failed=False)
                return cast(R, stop.value)
            except BaseException:
                run.finish(failed=True)
                raise
            run.suspend()
            value, thrown = None, None
            try:
                value = yield item
            except GeneratorExit:
                run.resume()
                try:
                    gen.close()
                finally:
                    run.finish(failed=False)
                raise
            except BaseException as exc:
                thrown = exc

    return timed_generator


def _wrap_async_generator(
    fn: Callable[..., AsyncGenerator[Any, Any]], name: str, registry: Registry | None
) -> Callable[..., AsyncGenerator[Any, Any]]:
    async def timed_async_generator(*args: Any, **kwargs: Any) -> AsyncGenerator[Any, Any]:
        agen = fn(*args, **kwargs)
        reg = registry or current_registry()
        run = _GeneratorRun(name, reg) if SWITCH.on else None
        value: Any = None
        thrown: BaseException | None = None
        while True:
            if run:
                run.resume()
            try:
                item = await (agen.asend(value) if thrown is None else agen.athrow(thrown))
            except StopAsyncIteration:
                if run:
                    run.finish(failed=False)
                return
            except BaseException:
                if run:
                    run.finish(failed=True)
                raise
            if run:
                run.suspend()
            value, thrown = None, None
            try:
                value = yield item
            except GeneratorExit:
                await agen.aclose()
                if run:
                    run.finish(failed=False)
                raise
            except BaseException as exc:
                thrown = exc

    return timed_async_generator


class _GeneratorRun:
    """One generator's life: sums the time spent inside it, its node open while it runs."""

    __slots__ = ("_cell", "_node", "_parent", "_reg", "_resumed", "_start", "active_ns")

    def __init__(self, name: str, reg: Registry) -> None:
        self._reg = reg
        self._cell = get_cell(None) or new_cell()
        self._parent = self._cell[0]
        self._node = NODES.child(self._parent, name)
        self._start = -1
        self._resumed = 0
        self.active_ns = 0

    def resume(self) -> None:
        # The consumer may resume us from another context: use whichever cell is current.
        self._cell = get_cell(None) or new_cell()
        self._parent = self._cell[0]
        self._cell[0] = self._node
        self._resumed = self._reg.clock()
        if self._start < 0:
            self._start = self._resumed

    def suspend(self) -> None:
        self.active_ns += max(0, self._reg.clock() - self._resumed)
        self._cell[0] = self._parent

    def finish(self, *, failed: bool) -> None:
        self.suspend()
        add_record(self._reg, self._node, self._start, self._start + self.active_ns, failed=failed)
