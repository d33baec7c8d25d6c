"""perfkit installs with a C compiler (compiled hot path) and without one (pure Python).

Each test builds a wheel from a copy of the package source, as ``pip install`` does on a user's
machine, then imports it from the unpacked wheel, away from this checkout.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HAS_COMPILER = shutil.which(os.environ.get("CC", "cc")) is not None or shutil.which("gcc") is not None

pytestmark = pytest.mark.slow


def build_and_unpack(tmp_path: Path, **env: str) -> tuple[list[str], Path]:
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "setup.py", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, src / name)
    shutil.copytree(ROOT / "perfkit", src / "perfkit", ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    out = tmp_path / "wheels"
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(out), str(src)],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert build.returncode == 0, build.stderr[-3000:]
    (wheel,) = out.glob("perfkit-*.whl")
    unpacked = tmp_path / "site"
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(unpacked)
        names = zf.namelist()
    return names, unpacked


# This checkout's editable install puts an import hook on sys.meta_path that would find its own
# perfkit._speedups for any perfkit package: the child leaves it out, as a plain install has none.
_FROM_SITE_ONLY = (
    "import sys, runpy; "
    "sys.meta_path[:] = [f for f in sys.meta_path if 'editable' not in getattr(f, '__module__', '')]; "
    "sys.argv = ['perfkit', '--version']; runpy.run_module('perfkit', run_name='__main__')"
)


def version_from(site: Path) -> str:
    return subprocess.run(
        [sys.executable, "-c", _FROM_SITE_ONLY],
        env={**os.environ, "PYTHONPATH": str(site), "PERFKIT_PURE": "0"},
        cwd=site,
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def test_without_a_compiler_the_install_succeeds_and_runs_pure_python(tmp_path: Path) -> None:
    names, site = build_and_unpack(tmp_path, CC="/bin/false")
    assert not [n for n in names if n.endswith((".so", ".pyd"))]
    assert "perfkit/py.typed" in names
    assert "hot path: pure Python (the compiled extension is not built" in version_from(site)


@pytest.mark.skipif(not HAS_COMPILER, reason="no C compiler on this machine")
def test_with_a_compiler_the_install_carries_the_compiled_hot_path(tmp_path: Path) -> None:
    names, site = build_and_unpack(tmp_path)
    assert [n for n in names if n.startswith("perfkit/_speedups") and n.endswith(".so")]
    assert "perfkit/_speedups.pyi" in names
    assert "hot path: compiled (perfkit._speedups)" in version_from(site)
