"""A snapshot as a readable table, nested as the section tree (what ``perfkit.report`` prints).

Rows are paths of the tree (siblings sorted by total time) with their exact
count, total, self time (total minus the children's) and mean; p95 and max
come from the series of that name. A recursion is one row of the tree with a
``↻`` row under it: the calls that re-entered it there, and how deep it went (their
time is inside the outer call's). Loops timed with ``timed_iter`` get their
own lines with the share of each turn spent waiting for the next item.
"""

from __future__ import annotations

from collections.abc import Callable

from ..._display import display_name
from ..._registry import current_registry
from ..._snapshot import NodeTotals, Path, Snapshot
from ..._units import format_seconds, plural
from ...loaders import LoopStats, all_loops

HEAD = ("count", "total", "self", "mean", "p95", "max")
RECURSED = "↻"
RECURSION_NOTE = (
    f"{RECURSED} = calls made inside an open call of the same name: their time is in the outer call"
)


def snapshot_text(snapshot: Snapshot | None = None) -> str:
    """``snapshot`` (default: the current registry's whole run) as text: ``perfkit.report``.

    >>> import perfkit
    >>> reg = perfkit.Registry()
    >>> with perfkit.section("epoch", registry=reg):
    ...     pass
    >>> print(snapshot_text(reg.snapshot()).splitlines()[2].split()[0])
    epoch
    """
    snap = snapshot if snapshot is not None else current_registry().snapshot()
    if not isinstance(snap, Snapshot):
        raise TypeError(f"snapshot must be a perfkit.Snapshot or None, got {snapshot!r}")
    lines = [
        f"perfkit: {len(snap)} series over {format_seconds(snap.duration_s)}, "
        f"{plural(len(snap.threads), 'thread')}"
    ]
    rows = tree_rows(snap)
    if rows:
        width = max(len(r[0]) for r in rows) + 2
        lines.append("".ljust(width) + "".join(h.rjust(11) for h in HEAD) + "  errors")
        lines += [
            (label.ljust(width) + "".join(c.rjust(11) for c in cells)).rstrip() for label, cells in rows
        ]
        lines.append("self = total minus the sections inside; p95 and max are over every record of that name")
        if snap.recursion:
            lines.append(RECURSION_NOTE)
    loops = _loop_lines(snap)
    if loops:
        lines += ["", "loops (timed_iter): share of each turn spent waiting for the next item", *loops]
    if snap.gauges:
        lines += ["", *_gauge_lines(snap)]
    return "\n".join(lines)


def _gauge_lines(snap: Snapshot) -> list[str]:
    names = {name: display_name(name) for name in snap.gauges}
    width = max(map(len, names.values())) + 2
    lines = ["gauges".ljust(width) + "".join(h.rjust(11) for h in ("min", "mean", "max", "last", "peak at"))]
    for name, g in snap.gauges.items():
        # A sample taken just before the window opened reads as a peak a hair before its start.
        cells = [f"{v:.1f}" for v in (g.min, g.mean, g.max, g.last)] + [f"{max(0.0, g.peak_at_s):.2f} s"]
        lines.append(names[name].ljust(width) + "".join(c.rjust(11) for c in cells))
    return lines


def tree_rows(snap: Snapshot) -> list[tuple[str, list[str]]]:
    """The section tree of ``snap`` as (indented label, cells) rows, siblings by total time."""
    tree = dict(snap.tree)
    # A section still open when the snapshot was taken has children but no record of its own.
    for path in list(tree):
        for i in range(1, len(path)):
            tree.setdefault(path[:i], NodeTotals(0, 0, 0))
    children: dict[Path, list[Path]] = {}
    for path in tree:
        children.setdefault(path[:-1], []).append(path)
    folds: dict[Path, list[Path]] = {}
    for path in snap.recursion:
        folds.setdefault(path[:-1], []).append(path)
    rows: list[tuple[str, list[str]]] = []

    def total_of(p: Path) -> int:
        return tree[p].total_ns or sum(total_of(c) for c in children.get(p, []))

    def walk(path: Path, prefix: str, tail: bool, depth: int) -> None:
        node = tree[path]
        kids = sorted(children.get(path, []), key=total_of, reverse=True)
        branch = "" if depth == 0 else prefix + ("└─ " if tail else "├─ ")
        rows.append(
            (
                branch + display_name(path[-1]),
                _cells(snap, path[-1], node, sum(tree[k].total_ns for k in kids)),
            )
        )
        inner = "" if depth == 0 else prefix + ("   " if tail else "│  ")
        for i, fold in enumerate(sorted(folds.get(path, []))):
            rows.append(
                _fold_row(snap, fold, inner + ("└─ " if i == len(folds[path]) - 1 and not kids else "├─ "))
            )
        for i, kid in enumerate(kids):
            walk(kid, inner, i == len(kids) - 1, depth + 1)

    for root in sorted(children.get((), []), key=total_of, reverse=True):
        walk(root, "", True, 0)
    return rows


def _fold_row(snap: Snapshot, path: Path, branch: str) -> tuple[str, list[str]]:
    """A recursion under the row it re-entered at: its calls, and how deep (no time of its own)."""
    fold = snap.recursion[path]
    return f"{branch}{RECURSED} {display_name(path[-1])}, {fold.depth:,} deep", [str(fold.count), *[""] * 6]


def _cells(snap: Snapshot, name: str, node: NodeTotals, children_ns: int) -> list[str]:
    if node.count == 0:
        return ["(open)", *[""] * 5, ""]
    fmt: Callable[[float], str] = format_seconds
    stats = snap.get(name)
    return [
        str(node.count),
        fmt(node.total_ns / 1e9),
        fmt(max(0, node.total_ns - children_ns) / 1e9),
        fmt(node.total_ns / node.count / 1e9),
        fmt(stats.p95_s) if stats else "",
        fmt(stats.max_s) if stats else "",
        f"  {node.errors}" if node.errors else "",
    ]


def _loop_lines(snap: Snapshot) -> list[str]:
    lines = []
    for loop in all_loops(snap):
        line = (
            f"  {display_name(loop.name)}: {loop.items} items, wait mean {format_seconds(loop.wait_mean_s)}, "
            f"loop body mean {format_seconds(loop.loop_mean_s)}; waiting {loop.wait_share:.1%} of the loop"
        )
        lines.append(line)
        if loop.worker_mean_s is not None:
            lines.append("    " + _workers_line(loop))
    return lines


def _workers_line(loop: LoopStats) -> str:
    assert loop.worker_mean_s is not None
    head = (
        f"workers take {format_seconds(loop.worker_mean_s)} per batch, the loop "
        f"{format_seconds(loop.loop_mean_s)}: "
    )
    if loop.workers_needed is None:
        return head + "the loop does no work of its own to hide the fetch behind"
    n = loop.workers or 0
    turns = loop.worker_mean_s / loop.loop_mean_s
    # A count here would ignore the cores and memory: what more workers would do is INPUT_BOUND's.
    return head + (
        f"a batch costs a worker {turns:.1f} loop turns, {n} worker{'s' if n != 1 else ''} now "
        "(what more would do, within the cores and memory: the INPUT_BOUND verdict)"
    )
