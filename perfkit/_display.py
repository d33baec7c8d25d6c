"""Names the user gave, safe to print: one line, no control characters, bounded in width.

Every text output (the summary, the console block, ``perfkit.report``, compare, the analyze and
diff tables, verdict messages) prints a user's names (sections, stages, loaders, ops in a trace)
through ``display_name``; the HTML report escapes them the same way after ``html.escape``;
``--json`` keeps the exact name. It sits in the core, below every renderer, because the run
directory's messages and the rules' verdicts name things too. ``perfkit.names`` re-exports it.
"""

from __future__ import annotations

import re

NAME_WIDTH = 120
"""The most characters ``display_name`` prints of a name; longer ones lose their middle."""

_BIDI = "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
_UNPRINTABLE = re.compile(f"[\x00-\x1f\x7f-\x9f\u2028\u2029{_BIDI}\ud800-\udfff]")
_SHORT = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    if char in _SHORT:
        return _SHORT[char]
    return f"\\x{ord(char):02x}" if ord(char) < 0x100 else f"\\u{ord(char):04x}"


def display_name(name: object, width: int | None = NAME_WIDTH) -> str:
    """A name the user gave (a section, a stage, a loader, an op in a trace) safe to print on one line.

    Names come from file paths, f-strings and data: a newline would break a report's line, a
    carriage return or an escape sequence overwrite it, a bidi override (U+202E) reorder the
    rest of it, a NUL cut it short. Those become visible escapes (``\\n``, ``\\x00``,
    ``\\u202e``); letters of any script and emoji are left alone. A name longer than ``width``
    keeps its start and end around ``…`` (``width=None``: never). Every text output prints
    names through it; ``--json`` keeps the exact name.

    >>> display_name("data\\nload\\x00er"), display_name("x" * 200, width=9)
    ('data\\\\nload\\\\x00er', 'xxxxx…xxx')
    >>> display_name("étape 🚀")
    'étape 🚀'
    """
    if width is not None and (isinstance(width, bool) or not isinstance(width, int) or width < 2):
        raise ValueError(f"width must be an int >= 2 or None, got {width!r}")
    text = _UNPRINTABLE.sub(_escape, name if isinstance(name, str) else str(name))
    if width is None or len(text) <= width:
        return text
    head = (width - 1) * 2 // 3
    return text[:head] + "…" + text[len(text) - (width - 1 - head) :]
