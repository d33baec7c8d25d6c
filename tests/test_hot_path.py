"""The compiled hot path (perfkit/_speedups.c) and the pure-Python one are one behaviour.

The whole suite runs once on each path (``make unit`` runs it again with ``PERFKIT_PURE=1``).
These tests pin what only a comparison can show, and what a compiled wrapper could get wrong
where a Python function gets it right for free: binding as a method, pickling by reference,
the attributes ``functools.wraps`` copies.
"""

from __future__ import annotations

import importlib.util
import inspect
import json
import os
import pickle
import subprocess
import sys
import weakref
from pathlib import Path
from typing import Any

import pytest

import perfkit
from perfkit._accel import PURE_REQUESTED, SPEEDUPS
from perfkit._section import Section

ROOT = Path(__file__).resolve().parents[1]
BUILT = importlib.util.find_spec("perfkit._speedups") is not None


def run_program(*, pure: bool) -> dict[str, Any]:
    env = {**os.environ, "PERFKIT_PURE": "1" if pure else "0"}
    out = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "hot_path_program.py")],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    result: dict[str, Any] = json.loads(out.stdout)
    return result


@pytest.mark.skipif(not BUILT, reason="the compiled extension is not built here (no C compiler at install)")
def test_both_paths_record_the_same_records_to_the_nanosecond() -> None:
    compiled, pure = run_program(pure=False), run_program(pure=True)
    assert compiled["hot_path"].startswith("compiled")
    assert pure["hot_path"].startswith("pure Python")
    assert compiled["records"]["run"]["series"]["leaf"]["count"] > 4096  # several drains
    assert compiled["records"] == pure["records"]


@pytest.mark.skipif(not BUILT, reason="the compiled extension is not built here (no C compiler at install)")
def test_the_compiled_path_is_active_where_it_is_built_unless_pure_is_asked() -> None:
    wrapped = perfkit.timed("x")(len)
    if PURE_REQUESTED:
        assert SPEEDUPS is None
        assert inspect.isfunction(wrapped)
    else:
        assert SPEEDUPS is not None
        assert SPEEDUPS.ready()
        assert type(wrapped) is SPEEDUPS.TimedFunction


@pytest.mark.parametrize("pure", ["1", "0"])
def test_the_version_says_which_path_runs(pure: str) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "perfkit", "--version"],
        env={**os.environ, "PERFKIT_PURE": pure},
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    if pure == "1":
        assert "hot path: pure Python (PERFKIT_PURE is set)" in out
    elif BUILT:
        assert "hot path: compiled (perfkit._speedups)" in out
    else:
        assert "hot path: pure Python (the compiled extension is not built" in out


@perfkit.timed
def module_level(x: int, y: int = 2) -> int:
    """Doubles, or scales."""
    return x * y


class Model:
    @perfkit.timed
    def forward(self, x: int) -> int:
        return x + 1

    @perfkit.timed
    @classmethod
    def build(cls) -> Model:
        return cls()

    @perfkit.timed
    @staticmethod
    def helper(x: int) -> int:
        return -x


def test_a_timed_function_keeps_what_functools_wraps_copies() -> None:
    assert module_level.__name__ == "module_level"
    assert module_level.__qualname__ == "module_level"
    assert module_level.__module__ == __name__
    assert module_level.__doc__ == "Doubles, or scales."
    assert inspect.signature(module_level) == inspect.signature(module_level.__wrapped__)
    assert module_level(3) == 6
    assert module_level(3, y=3) == 9
    assert module_level(x=1, y=5) == 5
    module_level.note = "kept"  # type: ignore[attr-defined]
    assert module_level.note == "kept"  # type: ignore[attr-defined]
    assert weakref.ref(module_level)() is module_level


def test_a_timed_method_binds_like_a_function(reg: perfkit.Registry) -> None:
    model = Model()
    assert model.forward(1) == 2
    bound = model.forward
    assert bound.__self__ is model
    assert bound(2) == 3
    assert Model.forward(model, 4) == 5
    assert isinstance(Model.build(), Model)
    assert Model.helper(3) == -3
    assert model.helper(1) == -1
    assert list(inspect.signature(bound).parameters) == ["x"]


def test_a_timed_function_pickles_by_reference_as_functions_do() -> None:
    # A spawn-started DataLoader worker receives its collate function this way.
    assert pickle.loads(pickle.dumps(module_level)) is module_level
    assert pickle.loads(pickle.dumps(Model().forward))(1) == 2


def test_sections_enter_and_exit_called_on_the_class(reg: perfkit.Registry, clock: Any) -> None:
    # What a subclass does (CudaSection calls Section.__enter__(self)).
    block = perfkit.section("block", registry=reg)
    assert isinstance(block, Section)
    assert Section.__enter__(block) is block
    clock.advance(7)
    assert Section.__exit__(block, None, None, None) is None
    assert reg.snapshot()["block"].total_s == 7e-9


def test_a_section_factory_call_answers_from_its_cache(reg: perfkit.Registry) -> None:
    assert perfkit.section("a", registry=reg) is perfkit.section("a", registry=reg)
    assert perfkit.section("a") is perfkit.section(name="a") is perfkit.section("a", registry=None)
    with pytest.raises(ValueError, match="name must be a non-empty str"):
        perfkit.section("")
    with pytest.raises(TypeError, match="registry must be a perfkit.Registry"):
        perfkit.section("a", registry="nope")  # type: ignore[arg-type]


def test_a_section_pickles_by_name_and_records_in_the_process_that_loads_it() -> None:
    # A Dataset holding a section, sent to spawn-started workers: the copy must intern its nodes
    # in the process that loads it, whose node table is not the sender's.
    child = (
        "import pickle, sys, perfkit\n"
        "with perfkit.section('first-in-child'):\n"
        "    pass\n"
        "block = pickle.loads(sys.stdin.buffer.read())\n"
        "with block:\n"
        "    pass\n"
        "print(sorted((name, s.count) for name, s in perfkit.get_registry().snapshot().items()))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", child],
        input=pickle.dumps(perfkit.section("load")),
        capture_output=True,
        cwd=ROOT,
        timeout=60,
        check=True,
    )
    assert out.stdout.decode().strip() == "[('first-in-child', 1), ('load', 1)]"


def test_records_reach_the_ring_in_the_order_they_were_made(clock: Any) -> None:
    # Compiled calls and record()s of the Python path into one series, across drains: the ring
    # keeps the call order even where a record()'s times are out of time order.
    reg = perfkit.Registry(capacity=20_000, clock=clock)
    step = perfkit.timed("s", registry=reg)(lambda: clock.advance(3))
    made: list[int] = []
    for i in range(10_000):
        if i % 7 == 3:
            reg.record("s", 5 * i, 5 * i + 1)  # measured long ago
            made.append(5 * i)
        else:
            made.append(clock.now)
            step()
    assert reg.snapshot().data("s").starts_ns.tolist() == made
