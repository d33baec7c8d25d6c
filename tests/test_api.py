"""The public API: what ``import perfkit`` offers and loads, and who may use which names."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

import perfkit

ROOT = Path(__file__).resolve().parents[1]

TOP_LEVEL = [
    "Cursor",
    "PerfkitWarning",
    "Registry",
    "ResourceSampler",
    "Snapshot",
    "Stats",
    "__version__",
    "cursor",
    "disable",
    "enable",
    "get_registry",
    "hot_path",
    "is_enabled",
    "report",
    "reset",
    "section",
    "snapshot",
    "timed",
    "timed_iter",
    "trial",
    "use_registry",
    "window",
    "write_chrome_trace",
]
SUBPACKAGES = [
    "autorun",
    "checks",
    "findings",
    "loaders",
    "monitor",
    "names",
    "reports",
    "resources",
    "run",
    "sinks",
    "stages",
    "torch",
    "trace",
]


def test_the_top_level_is_what_a_first_hour_needs() -> None:
    assert sorted(perfkit.__all__) == sorted(TOP_LEVEL)
    assert len(perfkit.__all__) <= 25
    assert all(hasattr(perfkit, name) for name in perfkit.__all__)


@pytest.mark.parametrize("name", [s for s in SUBPACKAGES if s != "names"])
def test_every_subpackage_says_what_it_exports_and_has_it(name: str) -> None:
    module = importlib.import_module(f"perfkit.{name}")
    assert module.__all__, name
    for exported in module.__all__:
        assert hasattr(module, exported), f"perfkit.{name}.{exported}"
        assert not exported.startswith("_"), f"perfkit.{name}.{exported}"


def test_perfkit_torch_exports_no_implementation_types() -> None:
    import perfkit.torch

    names = [
        "FlopCount",
        "ProfilerWindows",
        "SyncWatch",
        "TorchRanks",
        "batch_bytes",
        "count_flops",
        "follow_loaders",
        "gather_ranks",
        "instrument",
        "load_loader",
        "pinned_bandwidth",
        "time_collectives",
        "time_copy",
        "time_gradient_sync",
        "time_step_parts",
        "to_device",
        "trial",
        "watch_syncs",
        "world_size",
    ]
    assert sorted(perfkit.torch.__all__) == names


def test_import_perfkit_loads_no_report_plot_finding_or_trace_code() -> None:
    code = "import sys, perfkit; print(sorted(m for m in sys.modules if m.startswith(('perfkit', 'matpl'))))"
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    for heavy in (
        "perfkit.reports",
        "perfkit.findings",
        "perfkit.trace",
        "perfkit.torch",
        "matplotlib",
        "'torch",
    ):
        assert heavy not in loaded, heavy


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
    return names


@pytest.mark.parametrize("folder", ["integrations/lightning/src", "examples", "benchmarks"])
def test_no_private_perfkit_name_is_used_outside_perfkit(folder: str) -> None:
    used = {
        (str(f.relative_to(ROOT)), name)
        for f in (ROOT / folder).rglob("*.py")
        for name in _imports(f)
        if name.startswith("perfkit.") and any(part.startswith("_") for part in name.split(".")[1:])
    }
    assert used == set()


def test_every_module_of_the_lightning_package_needs_lightning() -> None:
    package = ROOT / "integrations" / "lightning" / "src" / "perfkit_lightning"
    modules = [m for m in package.glob("_*.py") if m.name != "__init__.py"]
    assert len(modules) >= 8
    for module in modules:
        needs = any(n.startswith("lightning") for n in _imports(module))
        assert needs, f"{module.name} would work without Lightning: it belongs in perfkit"


def test_a_plain_install_brings_psutil_and_the_lightning_all_extra_brings_the_report() -> None:
    from importlib.metadata import requires

    plain = [r for r in requires("perfkit") or [] if "extra ==" not in r]
    assert any(r.startswith("psutil") for r in plain)
    lightning_all = [
        r for r in requires("perfkit-lightning") or [] if r.replace('"', "'").endswith("extra == 'all'")
    ]
    assert any("report" in r for r in lightning_all)
    assert (ROOT / "LICENSE").read_text().startswith("MIT License")
