"""@timed: every kind of callable, names, nesting, errors, recursion and threads."""

from __future__ import annotations

import asyncio
import inspect
import threading

import pytest

import perfkit
from perfkit import Registry

from .conftest import FakeClock


def test_bare_decorator_names_the_series_module_dot_qualname(reg: Registry) -> None:
    @perfkit.timed(registry=reg)
    def load() -> int:
        return 1

    assert load() == 1
    assert list(reg.snapshot()) == [
        f"{__name__}.test_bare_decorator_names_the_series_module_dot_qualname.<locals>.load"
    ]


def test_plain_at_timed_records_into_the_current_registry(reg: Registry) -> None:
    @perfkit.timed
    def step() -> None:
        pass

    with perfkit.use_registry(reg):
        step()
    assert reg.snapshot()[step.__qualname__.join([f"{__name__}.", ""])].count == 1


def test_name_positional_or_keyword(reg: Registry, clock: FakeClock) -> None:
    @perfkit.timed("a", registry=reg)
    def a() -> None:
        clock.advance(2_000)

    @perfkit.timed(name="b", registry=reg)
    def b() -> None:
        clock.advance(3_000)

    a(), b(), b()
    snap = reg.snapshot()
    assert (snap["a"].count, snap["a"].total_s) == (1, 2e-6)
    assert (snap["b"].count, snap["b"].total_s) == (2, 6e-6)


def test_wrapper_keeps_name_doc_signature_and_wrapped() -> None:
    def area(width: float, height: float = 1.0) -> float:
        """Rectangle area."""
        return width * height

    wrapped = perfkit.timed(area)
    assert wrapped.__name__ == "area"
    assert wrapped.__doc__ == "Rectangle area."
    assert wrapped.__wrapped__ is area  # type: ignore[attr-defined]
    assert inspect.signature(wrapped) == inspect.signature(area)
    assert wrapped(2.0, height=3.0) == 6.0


def test_methods_static_and_class_methods(reg: Registry) -> None:
    class Model:
        @perfkit.timed("forward", registry=reg)
        def forward(self, x: int) -> int:
            return x + 1

        @perfkit.timed("build", registry=reg)
        @staticmethod
        def build() -> str:
            return "built"

        @perfkit.timed("create", registry=reg)
        @classmethod
        def create(cls) -> Model:
            return cls()

    m = Model.create()
    assert (m.forward(1), Model.build(), m.build()) == (2, "built", "built")
    snap = reg.snapshot()
    assert {k: snap[k].count for k in snap} == {"forward": 1, "build": 2, "create": 1}


def test_nested_calls_know_their_parent_and_self_time(reg: Registry, clock: FakeClock) -> None:
    @perfkit.timed("inner", registry=reg)
    def inner() -> None:
        clock.advance(10)

    @perfkit.timed("outer", registry=reg)
    def outer() -> None:
        clock.advance(5)
        inner()
        inner()

    outer()
    tree = reg.snapshot().tree
    assert tree[("outer",)].total_ns == 25
    assert tree[("outer", "inner")].count == 2
    assert tree[("outer", "inner")].total_ns == 20


def test_recursion_is_reentrant(reg: Registry, clock: FakeClock) -> None:
    @perfkit.timed("fact", registry=reg)
    def fact(n: int) -> int:
        clock.advance(1)
        return n * fact(n - 1) if n > 1 else 1

    assert fact(5) == 120
    snap = reg.snapshot()
    assert (snap["fact"].count, snap.tree[("fact",)].total_ns) == (1, 5)  # the outer call
    assert snap.recursion[("fact", "fact")].count == 4  # the inner ones, folded (tests/test_recursion.py)


def test_a_raising_call_is_recorded_as_an_error_and_the_exception_propagates(reg: Registry) -> None:
    class Boom(Exception):
        pass

    @perfkit.timed("fails", registry=reg)
    def fails() -> None:
        raise Boom("original")

    with pytest.raises(Boom, match="original"):
        fails()
    stats = reg.snapshot()["fails"]
    assert (stats.count, stats.errors) == (1, 1)


def test_async_function_is_timed_until_completion(reg: Registry) -> None:
    clock = reg.clock
    assert isinstance(clock, FakeClock)

    @perfkit.timed("fetch", registry=reg)
    async def fetch(delay_ns: int) -> int:
        await asyncio.sleep(0)
        clock.advance(delay_ns)
        return delay_ns

    assert inspect.iscoroutinefunction(fetch)
    assert asyncio.run(fetch(7_000)) == 7_000
    assert reg.snapshot()["fetch"].total_s == 7e-6


def test_concurrent_tasks_keep_their_own_parents(reg: Registry) -> None:
    @perfkit.timed("task", registry=reg)
    async def task(i: int) -> None:
        with perfkit.section(f"work{i}", registry=reg):
            await asyncio.sleep(0)
            await asyncio.sleep(0)

    async def main() -> None:
        await asyncio.gather(*(task(i) for i in range(3)))

    asyncio.run(main())
    tree = reg.snapshot().tree
    assert {p for p in tree if len(p) == 2} == {("task", f"work{i}") for i in range(3)}


def test_generator_is_timed_only_while_running(reg: Registry, clock: FakeClock) -> None:
    @perfkit.timed("produce", registry=reg)
    def produce(n: int):  # type: ignore[no-untyped-def]
        for i in range(n):
            clock.advance(100)  # work inside the generator
            yield i
        return "done"

    gen = produce(3)
    out = []
    for item in gen:
        clock.advance(1_000_000)  # the consumer's time must not count
        out.append(item)
    assert out == [0, 1, 2]
    stats = reg.snapshot()["produce"]
    assert (stats.count, stats.total_s) == (1, 300e-9)


def test_generator_send_throw_and_close_pass_through(reg: Registry) -> None:
    @perfkit.timed("echo", registry=reg)
    def echo():  # type: ignore[no-untyped-def]
        received = None
        try:
            while True:
                try:
                    received = yield received
                except KeyError:
                    received = "caught"
        finally:
            pass

    gen = echo()
    assert next(gen) is None
    assert gen.send("x") == "x"
    assert gen.throw(KeyError()) == "caught"
    gen.close()
    assert reg.snapshot()["echo"].count == 1


def test_generator_return_value_survives(reg: Registry) -> None:
    @perfkit.timed("g", registry=reg)
    def g():  # type: ignore[no-untyped-def]
        yield 1
        return 42

    def outer():  # type: ignore[no-untyped-def]
        return (yield from g())

    gen = outer()
    next(gen)
    with pytest.raises(StopIteration) as stop:
        next(gen)
    assert stop.value.value == 42


def test_async_generator_is_timed(reg: Registry, clock: FakeClock) -> None:
    @perfkit.timed("agen", registry=reg)
    async def agen(n: int):  # type: ignore[no-untyped-def]
        for i in range(n):
            clock.advance(10)
            yield i

    async def consume() -> list[int]:
        return [i async for i in agen(4)]

    assert asyncio.run(consume()) == [0, 1, 2, 3]
    assert reg.snapshot()["agen"].total_s == 40e-9


def test_threads_record_without_losing_any(clock: FakeClock) -> None:
    reg = perfkit.Registry(capacity=10_000, clock=clock)

    @perfkit.timed("work", registry=reg)
    def work() -> None:
        pass

    def run() -> None:
        for _ in range(2_000):
            work()

    threads = [threading.Thread(target=run) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    snap = reg.snapshot()
    assert snap["work"].count == 8_000
    assert len({t.name for t in snap.threads}) == 4


def test_decorated_at_import_follows_later_switches(reg: Registry) -> None:
    @perfkit.timed("f", registry=reg)
    def f() -> None:
        pass

    perfkit.disable()
    f()
    perfkit.enable()
    f()
    assert reg.snapshot()["f"].count == 1


def test_decorated_while_disabled_records_once_enabled(reg: Registry) -> None:
    perfkit.disable()

    @perfkit.timed("late", registry=reg)
    def late() -> None:
        pass

    late()
    perfkit.enable()
    late()
    assert reg.snapshot()["late"].count == 1


def test_use_registry_is_read_at_call_time(clock: FakeClock) -> None:
    @perfkit.timed("f")
    def f() -> None:
        pass

    first, second = perfkit.Registry(clock=clock), perfkit.Registry(clock=clock)
    with perfkit.use_registry(first):
        f()
    with perfkit.use_registry(second):
        f()
        f()
    assert first.snapshot()["f"].count == 1
    assert second.snapshot()["f"].count == 2


@pytest.mark.parametrize("bad", ["", 3, None.__class__])
def test_bad_names_are_rejected_naming_the_parameter(bad: object) -> None:
    with pytest.raises((TypeError, ValueError), match="name"):
        perfkit.timed(name=bad)  # type: ignore[call-overload]


def test_positional_name_must_be_a_non_empty_string() -> None:
    with pytest.raises(ValueError, match="name must be a non-empty str, got ''"):
        perfkit.timed("")


def test_name_given_twice_is_rejected() -> None:
    with pytest.raises(TypeError, match="once"):
        perfkit.timed("a", name="b")  # type: ignore[call-overload]


def test_registry_must_be_a_registry() -> None:
    with pytest.raises(TypeError, match="registry must be a perfkit.Registry"):
        perfkit.timed(registry="default")  # type: ignore[call-overload]
