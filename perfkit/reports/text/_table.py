"""Plain-text tables whose last column (a name) is shortened to fit the width of a terminal.

C++ kernel names run to hundreds of characters, almost all of it template arguments and
parameter lists; :func:`shorten` drops those first (``at::native::elementwise_kernel<…>(…)``)
and only then cuts the middle, so the start and the end of the name stay readable.

    >>> shorten("void at::native::elementwise_kernel<128, 4, at::native::Add>(int, float*)", 40)
    'at::native::elementwise_kernel<…>(…)'
    >>> print("\\n".join(table(["time", "name"], [["1.0 ms", "aten::mm"]], width=40, align="r")))
      time  name
    1.0 ms  aten::mm
"""

from __future__ import annotations

from collections.abc import Sequence

from ..._display import display_name

ELLIPSIS = "…"
_PAIRS = {"<": ">", "(": ")", "[": "]"}
MIN_NAME_WIDTH = 16
MIN_TEMPLATE = 8  # template characters worth keeping before giving them up


def shorten(name: str, width: int) -> str:
    """``name`` in at most ``width`` characters, losing the least telling parts first.

    In order: a leading ``void``, the parameter list, brackets nested in template arguments,
    the end of the template arguments; then every bracketed part and the middle of the name.
    """
    if len(name) <= width:
        return name
    short = name.removeprefix("void ")
    for depth, kinds in ((0, "("), (1, "<([")):
        if len(short) <= width:
            return short
        short = _collapse(short, depth, kinds)
    if len(short) <= width:
        return short
    span = _template(short)
    if span is not None:
        (lt, gt), keep = span, width - len(short) + (span[1] - span[0] - 1) - 1
        if keep >= MIN_TEMPLATE:
            return short[: lt + 1 + keep] + ELLIPSIS + short[gt:]
    return _cut(_collapse(short, 0, "<(["), width)


def _cut(name: str, width: int) -> str:
    if len(name) <= width:
        return name
    if width < 2:
        return ELLIPSIS[:width]
    head = (width - 1) * 2 // 3
    return name[:head] + ELLIPSIS + name[len(name) - (width - 1 - head) :]


def _template(name: str) -> tuple[int, int] | None:
    """Where the first outermost ``<...>`` opens and closes, if there is one."""
    closers: list[str] = []
    opened = -1
    for i, ch in enumerate(name):
        if closers and ch == closers[-1]:
            closers.pop()
            if not closers and opened >= 0:
                return opened, i
        elif ch in _PAIRS and (ch != "<" or i > 0 or closers):
            if not closers and ch == "<":
                opened = i
            closers.append(_PAIRS[ch])
    return None


def _collapse(name: str, depth: int, kinds: str) -> str:
    """Brackets of ``kinds`` opened at nesting ``depth`` emptied to ``…``; unchanged if they do not pair."""
    out: list[str] = []
    closers: list[str] = []
    hiding = -1  # the nesting level of the bracket being emptied, -1: none
    for ch in name:
        if closers and ch == closers[-1]:
            closers.pop()
            if hiding == len(closers):
                hiding = -1
                out.append(ELLIPSIS)
        elif ch in _PAIRS and (ch != "<" or out or closers):  # "<" opens only after a name
            if hiding < 0:
                out.append(ch)
                hiding = depth if len(closers) == depth and ch in kinds else -1
            closers.append(_PAIRS[ch])
            continue
        if hiding < 0:
            out.append(ch)
    return name if closers else "".join(out)


def table(headers: Sequence[str], rows: Sequence[Sequence[str]], *, width: int, align: str) -> list[str]:
    """Lines of a table: ``align`` says "r" or "l" for each column but the last, the name.

    The name column gets what the others leave of ``width`` (at least ``MIN_NAME_WIDTH``). Cells
    come from the trace (op and kernel names a user's code chose): each is printed on one line.
    """
    rows = [[display_name(c, None) for c in r] for r in rows]
    fixed = len(headers) - 1
    widths = [max(len(headers[i]), *(len(r[i]) for r in rows)) for i in range(fixed)]
    room = max(MIN_NAME_WIDTH, width - sum(widths) - 2 * fixed)

    def line(cells: Sequence[str]) -> str:
        parts = [
            c.rjust(w) if a == "r" else c.ljust(w) for c, w, a in zip(cells[:-1], widths, align, strict=True)
        ]
        return "  ".join([*parts, shorten(cells[-1], room)]).rstrip()

    return [line(headers), *(line(r) for r in rows)]


def block(
    head: str, headers: Sequence[str], rows: Sequence[Sequence[str]], *, width: int, align: str
) -> list[str]:
    """``head``, then the ``table`` indented under it."""
    return [head, *("  " + line for line in table(headers, rows, width=width, align=align))]
