"""The glossary: docs/design.md's "Names" table and ``perfkit.names``' docstring define the same
words, in the same order, so neither drifts from the other."""

from __future__ import annotations

import re
from pathlib import Path

import perfkit.names

ROOT = Path(__file__).resolve().parents[1]


def design_words() -> list[str]:
    names = (ROOT / "docs" / "design.md").read_text(encoding="utf-8").split("## Names", 1)[1]
    return re.findall(r"^\| \*([^*]+)\* \|", names.split("\n## ", 1)[0], re.M)


def docstring_words() -> list[str]:
    doc = perfkit.names.__doc__ or ""
    table = doc.split("The words of perfkit's public names", 1)[1].split("\n=", 1)[1]
    rows = table.split("\nword ", 1)[1].split("\n", 2)[2].split("\n=", 1)[0]
    return [line.split("  ")[0] for line in rows.splitlines() if not line.startswith(" ")]


def test_the_design_doc_and_the_names_module_define_the_same_words() -> None:
    assert design_words() == docstring_words()
