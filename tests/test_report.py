"""report(): a table sorted by total time, nested as the section tree, in readable units."""

from __future__ import annotations

import pytest

import perfkit
from perfkit import Registry
from perfkit._units import format_seconds

from .conftest import FakeClock


def row(text: str, name: str) -> list[str]:
    """The cells of the tree row for ``name``, tree drawing removed."""
    for line in text.splitlines()[2:]:
        cells = line.lstrip("├└─│ ").split()
        if cells and cells[0] == name:
            return cells
    raise AssertionError(f"no row {name!r} in\n{text}")


def test_tree_rows_with_total_self_and_mean(reg: Registry, clock: FakeClock) -> None:
    with perfkit.section("validate", registry=reg):
        clock.advance(2_000_000)  # 2 ms of its own
        for _ in range(4):
            with perfkit.section("postprocess", registry=reg):
                clock.advance(3_000_000)
    text = perfkit.report(reg.snapshot())
    assert row(text, "validate")[:7] == ["validate", "1", "14.00", "ms", "2.00", "ms", "14.00"]
    assert row(text, "postprocess")[:7] == ["postprocess", "4", "12.00", "ms", "12.00", "ms", "3.00"]


def test_siblings_are_sorted_by_total_time(reg: Registry, clock: FakeClock) -> None:
    for name, ns in [("small", 10), ("big", 1_000), ("medium", 100)]:
        with perfkit.section(name, registry=reg):
            clock.advance(ns)
    labels = [line.split()[0] for line in perfkit.report(reg.snapshot()).splitlines()[2:5]]
    assert labels == ["big", "medium", "small"]


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(812e-9, "812 ns"), (12.3e-6, "12.3 µs"), (4.567e-3, "4.57 ms"), (75.0, "75.00 s")],
)
def test_units_are_chosen_for_reading(seconds: float, text: str) -> None:
    assert format_seconds(seconds) == text


def test_loops_show_their_wait_share(reg: Registry, clock: FakeClock) -> None:
    def slow():  # type: ignore[no-untyped-def]
        for i in range(3):
            clock.advance(1_000)
            yield i

    for _ in perfkit.timed_iter(slow(), "train", registry=reg):
        clock.advance(3_000)
    assert "train: 3 items" in perfkit.report(reg.snapshot())
    assert "waiting 25.0% of the loop" in perfkit.report(reg.snapshot())


def test_a_section_still_open_shows_as_open(reg: Registry) -> None:
    with perfkit.section("fit", registry=reg):
        with perfkit.section("epoch", registry=reg):
            pass
        text = perfkit.report(reg.snapshot())
    assert row(text, "fit")[1] == "(open)"


def test_errors_are_counted(reg: Registry) -> None:
    with pytest.raises(KeyError), perfkit.section("lookup", registry=reg):
        raise KeyError
    assert row(perfkit.report(reg.snapshot()), "lookup")[-1] == "1"


def test_default_is_the_current_registry(reg: Registry) -> None:
    with perfkit.use_registry(reg):
        with perfkit.section("mine"):
            pass
        assert "mine" in perfkit.report()


def test_rejects_a_non_snapshot() -> None:
    with pytest.raises(TypeError, match="snapshot must be a perfkit.Snapshot"):
        perfkit.report({})  # type: ignore[arg-type]
