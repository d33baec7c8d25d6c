"""Readable text: one row per op or kernel, names shortened to the width, ``top_k`` rows in every table."""

from __future__ import annotations

from pathlib import Path

import pytest

from perfkit.reports import analysis_text
from perfkit.reports.text._table import shorten, table
from perfkit.trace import analyze_trace
from tests.trace.trace_builder import kernel, mark, op, step, write_trace

LONG = (
    "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>,"
    " at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3>)"
)


@pytest.mark.parametrize(
    ("width", "expected"),
    [
        (200, LONG),
        (
            120,
            "at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>,"
            " at::detail::Array<char*, 3> >(…)",
        ),
        (90, "at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<…>, at::deta…>(…)"),
        (60, "at::native::vectorized_elementwise_kernel<4, at::native…>(…)"),
        (40, "at::native::vectorized_ele…_kernel<…>(…)"),
    ],
)
def test_a_kernel_name_loses_its_parameters_then_its_template_arguments_then_its_middle(
    width: int, expected: str
) -> None:
    assert shorten(LONG, width) == expected
    assert len(shorten(LONG, width)) <= width


@pytest.mark.parametrize(
    "name", ["Memcpy HtoD (Pinned -> Device)", "operator<<(int) and much more text after it"]
)
def test_any_name_fits_whatever_its_brackets(name: str) -> None:
    for width in range(1, len(name) + 2):
        assert len(shorten(name, width)) <= width


def test_a_table_gives_the_name_what_the_numbers_leave() -> None:
    lines = table(["time", "calls", "name"], [["1.00 ms", "12", LONG]], width=50, align="rr")
    assert lines == ["   time  calls  name", "1.00 ms     12  at::native::vectorized…ernel<…>(…)"]
    assert all(len(line) <= 50 for line in lines)


def test_every_table_has_top_k_rows_and_fits_the_width(tmp_path: Path) -> None:
    events = [step(1, 0, 10_000)]
    for i in range(12):
        events += [op(f"aten::op{i}", 100 * i, 10 + i), mark(f"## region {i} ##", 100 * i, 50)]
        events.append(kernel(f"{LONG}{i}", 100 * i, 5 + i, stream=i))
        events.append({**kernel(f"Memcpy {i}", 2000 + 10 * i, 2, cat="gpu_memcpy"), "args": {"bytes": 1000}})
    a = analyze_trace(write_trace(tmp_path / "t.json", events), top_k=3)
    text = analysis_text(a, width=100)
    rows = [line for line in text.splitlines() if line.startswith("[Profiler]  ")]
    assert all(len(line) <= 100 for line in rows), max(rows, key=len)  # tables and findings alike
    for title in ("CPU ops", "device activities", "copies and fills", "annotations"):
        head = next(i for i, line in enumerate(text.splitlines()) if title in line)
        block = text.splitlines()[head + 2 : head + 6]
        assert sum(line.startswith("[Profiler]   ") for line in block) == 3, title
    assert len(a.idle) == 4  # the device, then 3 streams
    assert LONG + "11" in [k.name for k in a.top_cuda_kernels]  # the full name stays in the analysis
