"""perfkit's areas import downward only, and never another area's private module.

The order (docs/design.md draws it; ``test_the_design_doc_draws_these_layers`` keeps the two alike):

    cli        perfkit/__init__.py, __main__.py, _cli.py: the facade and the commands
    autorun    perfkit run: the launcher, and the session each of its processes runs
    monitor    a monitored run assembled once (Session, Options), script windows, StageMonitor
    reports    the HTML report, the console summary
    findings   verdicts, compare     |  torch   DataLoader workers, profiler windows, DDP
    run        the run directory
    sinks      one output path
    stages     the stage timeline    |  resources  the sampler  |  trace  profiler traces
    loaders    a loader's facts: its loop's wait and workers, settings and CPU split, trial rows
    core       the flat recording modules (clock, registry, section, snapshot, names, ...)

Areas on one line are siblings: neither imports the other. Every import counts, wherever it
stands: at the top, inside a function (a lazy import) or under ``TYPE_CHECKING``, since a
reader follows an import whatever its position, and a cycle hidden by laziness is still a
cycle. The walk reads source with ``ast``; nothing is imported.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

LAYERS: tuple[tuple[str, ...], ...] = (
    ("core",),
    ("loaders",),
    ("stages", "resources", "trace"),
    ("sinks",),
    ("run",),
    ("findings", "torch"),
    ("reports",),
    ("monitor",),
    ("autorun",),
    ("cli",),
)
"""Lowest first. An area may import any area on a lower line, and no other."""

FACADE = {"perfkit", "perfkit.__main__", "perfkit._cli"}
"""The package itself and the command line: above everything, imported by nothing in perfkit."""

RANK = {area: rank for rank, areas in enumerate(LAYERS) for area in areas}


def module_name(path: Path, package: Path) -> str:
    parts = path.relative_to(package.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def area_of(module: str, package: Path) -> str:
    """``perfkit.trace._events`` -> ``trace``; a flat module or a name of the package -> core."""
    if module in FACADE:
        return "cli"
    parts = module.split(".")
    if len(parts) > 1 and (package / parts[1]).is_dir():
        return parts[1]
    return "core"


def imported(path: Path, package: Path) -> list[tuple[int, str]]:
    """Every module ``path`` imports from ``package``, with its line: names resolved to modules."""
    me = module_name(path, package)
    here = me.split(".") if path.name == "__init__.py" else me.split(".")[:-1]
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = here[: len(here) - node.level + 1] if node.level else []
            target = ".".join([*base, *([node.module] if node.module else [])])
            folder = package.parent.joinpath(*target.split("."))
            modules = {p.name.split(".")[0] for p in folder.iterdir()} if folder.is_dir() else set()
            # ``from . import _speedups`` names a module (a .py, a package, a compiled extension);
            # ``from .run import window`` names something inside one
            found += [
                (node.lineno, f"{target}.{a.name}" if a.name in modules else target) for a in node.names
            ]
    return [(line, name) for line, name in found if name.split(".")[0] == package.name]


def violations(package: Path) -> list[str]:
    """Each import against the order, or into another area's private module, as ``file:line: why``."""
    bad: dict[str, None] = {}  # one line per import, in order, however many names it brings
    for path in sorted(package.rglob("*.py")):
        me = module_name(path, package)
        mine = area_of(me, package)
        for line, target in imported(path, package):
            theirs = area_of(target, package)
            where = f"{path.relative_to(package.parent)}:{line}"
            if theirs == mine:
                continue
            if target in FACADE or theirs == "cli":
                bad[f"{where}: {mine} imports {target}, the facade above every area"] = None
            elif RANK[theirs] >= RANK[mine]:
                bad[f"{where}: {mine} imports {target} ({theirs} is not below {mine})"] = None
            elif theirs != "core" and any(p.startswith("_") for p in target.split(".")[2:]):
                bad[f"{where}: {mine} imports {target}, a private module of {theirs}"] = None
    return list(bad)


def test_every_area_imports_downward_only() -> None:
    assert violations(ROOT / "perfkit") == []


def test_every_subpackage_has_a_layer() -> None:
    subpackages = {p.parent.name for p in (ROOT / "perfkit").glob("*/__init__.py")}
    assert subpackages <= set(RANK)


PLANTED = {
    "__init__.py": "from .run import window\n",
    "_clock.py": "def now() -> int:\n    return 0\n",
    "trace/__init__.py": "from ._events import read\n",
    "trace/_events.py": (
        "from typing import TYPE_CHECKING\n"
        "from .._clock import now\n"
        "if TYPE_CHECKING:\n"
        "    from ..findings import Finding\n"
    ),
    "run/__init__.py": "def window() -> None:\n    from ..trace._events import read\n",
    "findings/__init__.py": "from ..run import window\nimport perfkit\n",
}


def test_a_planted_back_edge_fails(tmp_path: Path) -> None:
    """A hidden cycle (a ``TYPE_CHECKING`` import up), a lazy private reach-in and a facade import."""
    package = tmp_path / "perfkit"
    for name, text in PLANTED.items():
        (package / name).parent.mkdir(parents=True, exist_ok=True)
        (package / name).write_text(text)
    assert violations(package) == [
        "perfkit/findings/__init__.py:2: findings imports perfkit, the facade above every area",
        "perfkit/run/__init__.py:2: run imports perfkit.trace._events, a private module of trace",
        "perfkit/trace/_events.py:4: trace imports perfkit.findings (findings is not below trace)",
    ]


@pytest.mark.parametrize("areas", LAYERS, ids=lambda areas: "+".join(areas))
def test_the_design_doc_draws_these_layers(areas: tuple[str, ...]) -> None:
    drawing = (ROOT / "docs" / "design.md").read_text(encoding="utf-8").split("## The layers", 1)[1]
    lines = [line for line in drawing.split("```")[1].splitlines() if line.strip()]
    row = next(i for i, line in enumerate(lines) if re.match(rf"\s*{areas[0]}\b", line))
    assert all(area in lines[row] for area in areas)
    assert len(lines) - 1 - row == RANK[areas[0]]  # lowest at the bottom
