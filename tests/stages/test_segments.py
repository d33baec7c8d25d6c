"""Segments: a stage epoch's records in stretches that can be paused (a training epoch around the
validation inside it)."""

from __future__ import annotations

import pytest

import perfkit
from perfkit import Registry
from perfkit.stages import Segments
from tests.conftest import FakeClock


def test_records_made_while_paused_are_left_out(reg: Registry, clock: FakeClock) -> None:
    segments = Segments(reg)
    with perfkit.section("train.step", registry=reg):
        clock.advance(10)
    segments.pause()
    with perfkit.section("val.step", registry=reg):
        clock.advance(1_000)
    segments.resume()
    with perfkit.section("train.step", registry=reg):
        clock.advance(20)
    snap = segments.close()
    assert list(snap) == ["train.step"]
    assert snap["train.step"].count == 2
    assert segments.wall_s == pytest.approx(30e-9)  # the paused stretch does not count


def test_pause_and_resume_twice_are_harmless(reg: Registry) -> None:
    segments = Segments(reg)
    segments.pause()
    segments.pause()
    assert not segments.open
    segments.resume()
    segments.resume()
    assert segments.open


def test_needs_a_registry() -> None:
    with pytest.raises(TypeError, match="registry must be a perfkit.Registry"):
        Segments("default")  # type: ignore[arg-type]
