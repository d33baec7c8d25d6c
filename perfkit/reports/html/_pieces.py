"""Small HTML pieces for the report: escaped text, tables, a plot or the reason it is missing.

>>> plot_or(None, "no memory samples")
'<p class="none">no memory samples</p>'
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Sequence

from ..._display import display_name


def e(text: object) -> str:
    r"""``text`` escaped for HTML content and attribute values; a NUL, a newline, another control
    character or a bidi override (in a name from a trace, a file path, a user's f-string) shown as
    an escape (``display_name``), never raw.

    >>> e("<b>a\x00b</b>")
    '&lt;b&gt;a\\x00b&lt;/b&gt;'
    """
    return html.escape(display_name(text, width=None))


def table(head: Sequence[str], rows: Iterable[Sequence[str]], *, first_class: str = "") -> str:
    """A table of escaped cells; ``first_class`` is the CSS class of each row's first cell."""
    cls = f' class="{first_class}"' if first_class else ""
    th = "".join(f"<th>{e(h)}</th>" for h in head)
    trs = "".join(
        f"<tr><td{cls}>{e(r[0])}</td>" + "".join(f"<td>{e(c)}</td>" for c in r[1:]) + "</tr>" for r in rows
    )
    return f"<table><thead><tr>{th}</tr></thead><tbody>{trs}</tbody></table>"


def plot_or(svg: str | None, missing: str) -> str:
    """The plot, or a line saying why there is none."""
    return svg if svg is not None else none(missing)


def none(text: str) -> str:
    return f'<p class="none">{e(text)}</p>'
