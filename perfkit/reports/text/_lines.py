"""The width of the terminal, and prose fitted to it: cut, wrapped, kept on one line."""

from __future__ import annotations

import shutil
import textwrap

from ..._display import display_name


def terminal_width() -> int:
    """Columns of the terminal (``COLUMNS`` wins), 120 when output goes elsewhere."""
    return shutil.get_terminal_size((120, 24)).columns


def wide_width() -> int:
    """The terminal's width, at least 80: the width prose is wrapped to."""
    return max(80, terminal_width())


def cut(text: str, width: int) -> str:
    """``text`` in at most ``width`` characters, its end replaced by ``…`` when it is longer."""
    return text if len(text) <= width else text[: width - 1] + "…"


def wrap(text: str, width: int, indent: str) -> str:
    """``text`` wrapped to ``width`` after ``indent``; its following lines indented three more."""
    return textwrap.fill(text, width, initial_indent=indent, subsequent_indent=indent + "   ")


def safe(text: str) -> str:
    """Prose that may hold a name (a message, a problem): on one line, whatever the name holds."""
    return display_name(text, width=None)
