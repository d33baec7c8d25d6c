"""Shared fixtures: a fake clock passed through the registry's ``clock=`` seam, and a fresh registry."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import perfkit


class FakeClock:
    """A clock that moves only when told to: durations in tests are exact and need no sleep."""

    def __init__(self, start_ns: int = 1_000_000) -> None:
        self.now = start_ns

    def __call__(self) -> int:
        return self.now

    def advance(self, ns: int) -> None:
        self.now += ns


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def reg(clock: FakeClock) -> perfkit.Registry:
    return perfkit.Registry(capacity=1000, clock=clock)


@pytest.fixture(autouse=True)
def _enabled() -> Iterator[None]:
    """Every test starts and ends with recording switched on."""
    perfkit.enable()
    yield
    perfkit.enable()
