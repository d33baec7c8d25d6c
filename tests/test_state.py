"""The on/off switch: enable(), disable() and PERFKIT_DISABLED read at call time."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

import perfkit


def test_enable_and_disable_toggle_is_enabled() -> None:
    perfkit.disable()
    assert not perfkit.is_enabled()
    perfkit.enable()
    assert perfkit.is_enabled()


@pytest.mark.parametrize(("value", "enabled"), [("1", False), ("true", False), ("0", True), ("", True)])
def test_environment_variable_sets_the_starting_state(value: str, enabled: bool) -> None:
    code = "import perfkit; print(perfkit.is_enabled())"
    env = {**os.environ, "PERFKIT_DISABLED": value}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == str(enabled)


def test_disabled_entry_points_are_pass_throughs(reg: perfkit.Registry) -> None:
    perfkit.disable()

    @perfkit.timed(registry=reg)
    def f(x: int) -> int:
        return x + 1

    with perfkit.section("s", registry=reg):
        out = [f(i) for i in perfkit.timed_iter(range(3), "it", registry=reg)]
    assert out == [1, 2, 3]
    assert len(reg.snapshot()) == 0


def test_core_import_does_not_import_torch() -> None:
    code = "import sys, perfkit; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
