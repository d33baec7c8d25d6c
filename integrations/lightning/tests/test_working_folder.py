"""A Trainer with no logger writes its run directory in the working folder; ``import perfkit`` still
works there. The directory is ``perfkit-run`` (``names.RUN_DIR_NAME``) because a folder named
``perfkit`` in the working folder shadows an editable install served by setuptools' import hook:
the hook is a finder after Python's own, which takes the folder for a namespace package first."""

from __future__ import annotations

import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from perfkit_lightning import PerfMonitor

import perfkit
from perfkit.names import RUN_DIR_NAME

from .tiny import Tiny, trainer

IMPORT = "import perfkit; print(perfkit.timed.__name__)"


def install_kind() -> str:
    """How perfkit is installed: "hook" (editable, setuptools' import hook), "path" (editable, a
    path in a .pth file) or "regular"."""
    dist = importlib.metadata.distribution("perfkit")
    direct = json.loads(dist.read_text("direct_url.json") or "{}")
    if not direct.get("dir_info", {}).get("editable"):
        return "regular"
    pth = [f for f in dist.files or () if f.name.startswith("__editable__") and f.name.endswith(".pth")]
    hook = any(Path(str(dist.locate_file(f))).read_text().startswith("import ") for f in pth)
    return "hook" if hook else "path"


def import_perfkit_in(folder: Path) -> subprocess.CompletedProcess[str]:
    """``import perfkit`` as a user's script there would: the package as installed (PYTHONPATH
    dropped; a path on it is searched like the working folder, and a regular package wins)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run(
        [sys.executable, "-c", IMPORT], cwd=folder, env=env, capture_output=True, text=True, timeout=60
    )


@pytest.fixture(scope="module")
def working_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder where a Trainer with no logger and no ``default_root_dir`` ran a short fit."""
    folder = tmp_path_factory.mktemp("work")
    before = os.getcwd()
    os.chdir(folder)
    try:
        with perfkit.use_registry(perfkit.Registry()):
            trainer(
                None, [PerfMonitor(console=False)], logger=False, max_epochs=1, default_root_dir=None
            ).fit(Tiny())
    finally:
        os.chdir(before)
    return folder


def test_the_run_directory_in_the_working_folder_leaves_import_perfkit_working(working_folder: Path) -> None:
    assert sorted(p.name for p in working_folder.iterdir()) == [RUN_DIR_NAME]
    assert (working_folder / RUN_DIR_NAME / "windows.jsonl").exists()
    done = import_perfkit_in(working_folder)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "timed"


def test_a_folder_named_perfkit_there_would_shadow_an_editable_install(
    working_folder: Path, tmp_path: Path
) -> None:
    kind = install_kind()
    if kind != "hook":
        pytest.skip(f"perfkit is a {kind} install here, which a folder of its name cannot shadow")
    old = tmp_path / "perfkit"  # a run directory named like the package
    shutil.copytree(working_folder / RUN_DIR_NAME, old)
    done = import_perfkit_in(tmp_path)
    assert done.returncode != 0
    assert "has no attribute 'timed'" in done.stderr
