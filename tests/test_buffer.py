"""The pending buffer's contract, written once in perfkit/_buffer.py, is what the C file and the
registry actually use: the names are read from perfkit/_speedups.c's text, so a rename on either
side fails here rather than sending every compiled record down the Python path."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import numpy as np
import pytest

import perfkit
from perfkit import _buffer
from perfkit._accel import SPEEDUPS
from perfkit._buffer import CONFIGURED, CORE_ATTRIBUTES, DRAIN, PyRegistryCore, take_all

ROOT = Path(__file__).resolve().parents[1]
C_SOURCE = (ROOT / "perfkit" / "_speedups.c").read_text()


def c_table(name: str) -> set[str]:
    """The Python-visible names of the C table ``name`` (``static PyGetSetDef core_getset[] = {...};``)."""
    body = re.search(rf"\b{name}\[\] = \{{(.*?)\n\}};", C_SOURCE, re.S)
    assert body is not None, f"no table {name} in _speedups.c"
    return set(re.findall(r'\{"(\w+)"', body.group(1)))


def test_the_c_core_defines_exactly_the_shared_attributes() -> None:
    assert c_table("core_getset") | c_table("core_methods") == set(CORE_ATTRIBUTES)


def test_the_python_core_defines_the_same_attributes() -> None:
    assert all(hasattr(PyRegistryCore, name) for name in CORE_ATTRIBUTES)


@pytest.mark.skipif(SPEEDUPS is None, reason="the compiled extension is not in use")
def test_the_built_core_defines_them() -> None:
    assert all(hasattr(SPEEDUPS.RegistryCore, name) for name in CORE_ATTRIBUTES)


def test_c_drains_by_the_registry_method_of_that_name() -> None:
    assert re.search(rf'g_str_drain = PyUnicode_InternFromString\("{DRAIN}"\)', C_SOURCE)
    assert callable(getattr(perfkit.Registry(), DRAIN))


def test_the_registry_configures_c_with_the_contract_keywords() -> None:
    known = re.search(r"static const char \*known\[\] = \{(.*?)\};", C_SOURCE, re.S)
    assert known is not None
    assert set(CONFIGURED) <= set(re.findall(r'"(\w+)"', known.group(1)))
    tree = ast.parse((ROOT / "perfkit" / "_registry.py").read_text())
    calls = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "configure"
    ]
    assert [tuple(k.arg for k in call.keywords) for call in calls] == [CONFIGURED]


def test_take_all_keeps_the_order_records_were_made_in() -> None:
    reg = perfkit.Registry()
    reg.drain()
    reg._buf += (1, 10, 20, 2, 30, 40)
    taken = take_all(reg)
    assert taken is not None
    flat, unreadable = taken
    assert flat.tolist() == [1, 10, 20, 2, 30, 40]
    assert unreadable == 0
    assert take_all(reg) is None


def test_merged_puts_packed_records_where_the_marks_say() -> None:
    listed = np.array([1, 0, 0, 2, 0, 0], dtype=np.int64)
    packed = np.array([7, 0, 0, 8, 0, 0, 9, 0, 0], dtype=np.int64)
    # packed record 0 before any listed; from packed record 1 on, after 1 listed; from 2 on, after 2
    marks = np.array([1, 1, 2, 2], dtype=np.int64)
    assert _buffer._merged(listed, packed, marks)[0::3].tolist() == [7, 1, 8, 2, 9]
