"""The tracer seam: inside a profiler window, @timed calls and sections are also named ranges."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import perfkit
from perfkit import Registry
from perfkit._state import set_tracer


class RecordingTracer:
    """Keeps the ranges opened on it, as a profiler would show them."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []

    def begin(self, name: str) -> object:
        self.events.append(("begin", name))
        return name

    def end(self, handle: object) -> None:
        self.events.append(("end", str(handle)))


@pytest.fixture
def tracer() -> Iterator[RecordingTracer]:
    t = RecordingTracer()
    previous = set_tracer(t)
    yield t
    set_tracer(previous)


def test_sections_and_timed_calls_open_nested_ranges(tracer: RecordingTracer, reg: Registry) -> None:
    @perfkit.timed("unclip", registry=reg)
    def unclip() -> int:
        return 1

    with perfkit.section("postprocess", registry=reg):
        unclip()
    assert tracer.events == [
        ("begin", "postprocess"),
        ("begin", "unclip"),
        ("end", "unclip"),
        ("end", "postprocess"),
    ]
    snap = reg.snapshot()
    assert snap.tree[("postprocess", "unclip")].count == 1  # still recorded as usual


def test_a_raising_call_still_closes_its_range(tracer: RecordingTracer, reg: Registry) -> None:
    @perfkit.timed("fails", registry=reg)
    def fails() -> None:
        raise ValueError("bad polygon")

    with pytest.raises(ValueError, match="bad polygon"):
        fails()
    assert tracer.events == [("begin", "fails"), ("end", "fails")]
    assert reg.snapshot()["fails"].errors == 1


def test_without_a_tracer_no_range_is_opened(reg: Registry) -> None:
    tracer = RecordingTracer()
    with perfkit.section("outside", registry=reg):
        pass
    assert tracer.events == []
    assert set_tracer(None) is None


def test_an_instrumented_loader_marks_each_wait(tracer: RecordingTracer) -> None:
    from torch.utils.data import DataLoader

    import perfkit.torch

    loader = perfkit.torch.instrument(DataLoader(list(range(4)), batch_size=2), "val", time_wait=True)
    list(loader)
    # two batches, and the call that finds the end (shutting workers down is data time too)
    assert tracer.events.count(("begin", "val.data.wait")) == 3
    assert tracer.events.count(("end", "val.data.wait")) == 3
