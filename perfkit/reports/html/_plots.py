"""The HTML report's plots: matplotlib figures rendered to inline SVG (no pyplot, no display).

Each function takes what the run directory holds and returns an ``<svg>`` element as text,
or None when the run has nothing to draw. Text is drawn as paths, so the SVG needs no font
and the page no network.

    svg = steps_svg(read_run(path).windows)
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

import matplotlib
import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from ..._display import display_name
from ..._snapshot import Snapshot
from ...names import MEMORY_AVAILABLE, part_label, stage_label, step_series
from ...run import RunInterval, RunTrace, RunWindow
from ...stages import PARTS
from ...trace import ALL_PARTS

if TYPE_CHECKING:
    from matplotlib.typing import RcKeyType

STAGE_COLORS = {"train": "#1f77b4", "val": "#ff7f0e", "test": "#2ca02c", "predict": "#9467bd"}
PART_COLORS = {
    "data_wait": "#d62728",
    "step": "#1f77b4",
    "callbacks": "#ff7f0e",
    "module_hooks": "#8c564b",
    "loggers": "#e377c2",
    "loader_setup": "#9467bd",
    "other": "#c7c7c7",
}


def to_svg(fig: Figure) -> str:
    """``fig`` as an ``<svg>`` element (the XML prolog and doctype dropped, for inlining).

    Matplotlib's RDF metadata (a date, links to matplotlib.org) is left out: the page stays
    reproducible and references nothing outside itself.
    """
    buf = io.StringIO()
    fig.savefig(buf, format="svg", metadata=dict.fromkeys(("Date", "Type", "Creator", "Format")))
    text = buf.getvalue()
    return text[text.index("<svg") :]


def _style() -> AbstractContextManager[None]:
    """The report's look, whatever the user's matplotlibrc; text as paths, ids that do not vary."""
    rc: dict[RcKeyType, Any] = {
        "svg.fonttype": "path",
        "svg.hashsalt": "perfkit",
        "font.size": 9,
        "axes.grid": True,
        "grid.alpha": 0.3,
    }
    return matplotlib.rc_context(rc)


def _figure(width: float, height: float) -> Figure:
    return Figure(figsize=(width, height), layout="constrained")


def plain(text: str) -> str:
    r"""User text (a stage, a series, a part name) for matplotlib, which would read ``$...$`` as
    mathtext and fail on ``$\frac{a$``: every ``$`` is escaped, so the text is drawn as written;
    a control character is drawn as its escape and a long name elided (``display_name``).

    >>> plain("val $x$")
    'val \\$x\\$'
    """
    return display_name(text, 80).replace("$", r"\$")


def _by_stage(windows: Sequence[RunWindow]) -> dict[str, list[RunWindow]]:
    out: dict[str, list[RunWindow]] = {}
    for w in windows:
        out.setdefault(w.stage, []).append(w)
    return out


def _color(stage: str) -> str:
    return STAGE_COLORS.get(stage, "#7f7f7f")


def steps_svg(windows: Sequence[RunWindow]) -> str | None:
    """Per stage, side by side: a box plot of step times per epoch, and p50/p95/p99 over epochs."""
    stages = {p: [w for w in ws if step_series(p) in w.snapshot] for p, ws in _by_stage(windows).items()}
    stages = {p: ws for p, ws in stages.items() if ws}
    if not stages:
        return None
    with _style():
        fig = _figure(max(6.0, 4.2 * len(stages)), 5.6)
        axes = fig.subplots(2, len(stages), squeeze=False)
        for col, (stage, ws) in enumerate(stages.items()):
            x, epochs = np.arange(1, len(ws) + 1), [str(w.epoch) for w in ws]  # val may run twice an epoch
            box, trend = axes[0][col], axes[1][col]
            data = [w.snapshot.data(step_series(stage)).durations_ns / 1e6 for w in ws]
            box.boxplot(data, positions=x, patch_artist=True, boxprops={"facecolor": _color(stage)})
            for q, style in (("median", "-"), ("p95", "--"), ("p99", ":")):
                values = [w.metric(f"step_ms_{q}") or np.nan for w in ws]
                trend.plot(x, values, style, marker="o", color=_color(stage), label=q)
            for ax, what in ((box, "step time per epoch"), (trend, "step percentiles")):
                ax.set_xticks(x, epochs)
                ax.set(title=plain(f"{stage_label(stage)}: {what}"), ylabel="ms", xlabel="epoch")
            trend.legend()
        return to_svg(fig)


def time_split_svg(windows: Sequence[RunWindow]) -> str | None:
    """Per stage epoch, stacked: each part of its account (data wait, step, callbacks, ...)."""
    if not windows:
        return None
    with _style():
        fig = _figure(max(6.0, 0.45 * len(windows) + 2), 3.4)
        ax = fig.subplots()
        x = np.arange(len(windows))
        bottom = np.zeros(len(windows))
        for part in PARTS:
            seconds = np.array([w.window.account.seconds(part) for w in windows])
            ax.bar(x, seconds, bottom=bottom, color=PART_COLORS[part], label=part.replace("_", " "))
            bottom += seconds
        _window_ticks(ax, windows)
        ax.set(ylabel="seconds", title="where each stage epoch's time went")
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=7)
        return to_svg(fig)


STEP_PART_COLORS = {
    "forward": "#1f77b4",
    "backward": "#17becf",
    "optimizer": "#bcbd22",
    "zero_grad": "#7f7f7f",
    "rest": "#c7c7c7",
}


def step_parts_svg(windows: Sequence[RunWindow]) -> str | None:
    """Per stage, stacked per epoch: the step's parts (forward, backward, the optimizer step,
    zero_grad, the rest), as milliseconds per step: which part a slow step spends its time in."""
    stages = {
        stage: [w for w in ws if w.window.account.subjects.get("step") and w.metric("steps")]
        for stage, ws in _by_stage(windows).items()
    }
    stages = {stage: ws for stage, ws in stages.items() if ws}
    if not stages:
        return None
    with _style():
        fig = _figure(max(6.0, 4.2 * len(stages)), 3.4)
        axes = fig.subplots(1, len(stages), squeeze=False)[0]
        for ax, (stage, ws) in zip(axes, stages.items(), strict=True):
            x = np.arange(len(ws))
            bottom = np.zeros(len(ws))
            for part, color in STEP_PART_COLORS.items():
                ms = np.array(
                    [
                        1e3 * w.window.account.subjects["step"].get(part, 0.0) / (w.metric("steps") or 1)
                        for w in ws
                    ]
                )
                ax.bar(x, ms, bottom=bottom, color=color, label=part_label(part))
                bottom += ms
            ax.set_xticks(x, [str(w.epoch) for w in ws])
            ax.set(
                title=plain(f"{stage_label(stage)}: the step's parts"), ylabel="ms per step", xlabel="epoch"
            )
        axes[-1].legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=7)
        return to_svg(fig)


def timeline_svg(intervals: Sequence[RunInterval]) -> str | None:
    """The run over time: each interval window's parts as shares of its time, stacked, against the
    global step it ended at (a long epoch's slow shard or a slowing step shows where it began)."""
    if not intervals:
        return None
    with _style():
        fig = _figure(max(6.0, 0.08 * len(intervals) + 5), 3.4)
        ax = fig.subplots()
        x = np.array([i.step if i.step is not None else k for k, i in enumerate(intervals)], dtype=float)
        shares = [np.array([i.account.fraction(p) for i in intervals]) for p in PARTS]
        ax.stackplot(
            x, *shares, colors=[PART_COLORS[p] for p in PARTS], labels=[part_label(p) for p in PARTS]
        )
        ax.set(
            ylim=(0, 1),
            ylabel="share of the interval",
            xlabel="step",
            title="where the time went, over the run",
        )
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=7)
        return to_svg(fig)


def workers_svg(windows: Sequence[RunWindow]) -> str | None:
    """Worker time per batch against the main loop's step time, for windows with worker records."""
    ws = [w for w in windows if w.metric("worker_batch_ms_mean") is not None]
    if not ws:
        return None
    with _style():
        fig = _figure(max(6.0, 0.6 * len(ws) + 2), 3.4)
        ax = fig.subplots()
        x = np.arange(len(ws))
        bars = {
            "worker time per batch": ("worker_batch_ms_mean", "#9467bd"),
            "main-loop step": ("step_ms_mean", "#1f77b4"),
            "data wait per batch": ("data_wait_ms_mean", "#d62728"),
        }
        for i, (label, (metric, color)) in enumerate(bars.items()):
            values = [w.metric(metric) or 0.0 for w in ws]
            ax.bar(x + (i - 1) * 0.27, values, width=0.27, color=color, label=label)
        _window_ticks(ax, ws, [f"\n{w.metric('workers') or 0:.0f} workers" for w in ws])
        ax.set(ylabel="ms per batch", title="DataLoader workers against the main loop")
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=7)
        return to_svg(fig)


def memory_svg(snapshot: Snapshot, windows: Sequence[RunWindow]) -> str | None:
    """Every memory gauge (``*_mb``) over time, the stage windows shaded behind them; the host's
    available memory on an axis of its own (dashed, right), so a process's few hundred MB are not
    drawn flat against a host's tens of GB."""
    names = [n for n in snapshot.gauges if n.endswith("_mb")]
    if not names:
        return None
    starts = [int(snapshot.gauge_data(n).times_ns[0]) for n in names] + [w.start_ns for w in windows]
    t0 = min(starts)
    with _style():
        fig = _figure(10.0, 3.6)
        ax = fig.subplots()
        for w in windows:
            ax.axvspan(
                (w.start_ns - t0) / 1e9, (w.end_ns - t0) / 1e9, color=_color(w.stage), alpha=0.15, lw=0
            )
            mid = (w.start_ns + w.end_ns - 2 * t0) / 2e9
            label = plain(f"{w.stage} {w.epoch}")
            ax.text(mid, 0.98, label, transform=ax.get_xaxis_transform(), ha="center", va="top", fontsize=7)
        host = ax.twinx() if MEMORY_AVAILABLE in names else None
        for n in names:
            g = snapshot.gauge_data(n)
            if host is not None and n == MEMORY_AVAILABLE:
                host.plot((g.times_ns - t0) / 1e9, g.values, "--", color="#7f7f7f", label=plain(n))
            else:
                ax.plot((g.times_ns - t0) / 1e9, g.values, label=plain(n))
        if host is not None:
            top = max(float(np.max(snapshot.gauge_data(MEMORY_AVAILABLE).values)), 1.0)
            host.set_ylim(0, 1.1 * top)
            host.ticklabel_format(axis="y", style="plain", useOffset=False)
            host.set(ylabel="MB available on the host")
        stages = dict.fromkeys(w.stage for w in windows)
        spans = [Patch(color=_color(p), alpha=0.15, label=plain(f"{p} window")) for p in stages]
        lines = [*ax.get_lines(), *(host.get_lines() if host is not None else [])]
        ax.legend(handles=[*lines, *spans], loc="upper left", bbox_to_anchor=(1.08, 1), fontsize=7)
        ax.set(xlabel="seconds since the first sample", ylabel="MB", title="memory over time")
        return to_svg(fig)


def profiler_svg(traces: Sequence[RunTrace]) -> str | None:
    """One horizontal bar per analysed profiler window: the share of each part of its step time."""
    done = [(t, a.parts) for t in traces if (a := t.analysis) is not None]
    if not done:
        return None
    with _style():
        fig = _figure(8.0, 1.2 + 0.4 * len(done))
        ax = fig.subplots()
        y = np.arange(len(done))
        left = np.zeros(len(done))
        for part in ALL_PARTS:
            share = np.array([split.share(part) for _, split in done])
            ax.barh(y, share, left=left, label=part_label(part))
            left += share
        ax.set_yticks(y, [plain(f"{t.stage} {t.epoch} rank {t.rank}") for t, _ in done])
        ax.set(xlim=(0, 1), xlabel="share of profiled step time")
        ax.legend(ncols=len(ALL_PARTS), loc="lower center", bbox_to_anchor=(0.5, 1.02), fontsize=7)
        return to_svg(fig)


def _window_ticks(ax: Axes, windows: Sequence[RunWindow], suffixes: Sequence[str] = ()) -> None:
    labels = [plain(f"{w.stage} {w.epoch}") for w in windows]
    if suffixes:
        labels = [a + b for a, b in zip(labels, suffixes, strict=True)]
    ax.set_xticks(np.arange(len(windows)), labels, rotation=90 if len(windows) > 10 else 0, fontsize=7)
