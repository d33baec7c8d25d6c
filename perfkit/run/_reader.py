"""Reading a run directory back (the format ``RunWriter`` writes), checking every file on the way.

    run = read_run("lightning_logs/version_0/perfkit")
    [(w.stage, w.epoch, w.metric("step_ms_p95")) for w in run.windows]
    run.problems        # ('final.json is missing: ...',) for a run that was killed

A file that is there but broken (a line that is not JSON in the middle of
``windows.jsonl``, a snapshot that does not parse) is an error naming the file
and line. What a killed run leaves is not: a truncated last line is skipped and
a missing ``final.json`` noted, so a partial run still reads.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._snapshot import Snapshot
from ..stages import SlowStep, StageWindow, stage_prefix

if TYPE_CHECKING:
    from ..trace import TraceAnalysis


@dataclass(frozen=True)
class RunWindow:
    """One line of ``windows.jsonl`` (a stage epoch): its ``StageWindow`` (snapshot loaded), the
    metrics logged for it, the metric prefix they carry and the step they were logged at."""

    window: StageWindow
    step: int | None
    prefix: str | None
    start_ns: int
    end_ns: int
    metrics: Mapping[str, float]
    snapshot_file: str

    @property
    def stage(self) -> str:
        return self.window.stage

    @property
    def epoch(self) -> int:
        return self.window.epoch

    @property
    def wall_s(self) -> float:
        return self.window.wall_s

    @property
    def samples(self) -> int | None:
        return self.window.samples

    @property
    def slowest(self) -> tuple[SlowStep, ...]:
        return self.window.slowest

    @property
    def snapshot(self) -> Snapshot:
        return self.window.snapshot

    def metric(self, name: str) -> float | None:
        """``metrics`` by the name after the stage (``"step_ms_p95"``), under the run's prefix."""
        if self.prefix is not None:
            return self.metrics.get(f"{stage_prefix(self.stage, self.prefix)}/{name}")
        # Format 1 recorded no prefix: the shortest key ending in the stage's epoch_s gives it.
        base = min(
            (k[: -len("epoch_s")] for k in self.metrics if k.endswith("/epoch_s")), key=len, default=""
        )
        return self.metrics.get(base + name)


@dataclass(frozen=True)
class RunTrace:
    """One line of ``traces.jsonl``: a profiler window, its trace file and its analysis (or None)."""

    stage: str
    epoch: int
    rank: int
    trace: Path
    summary: Mapping[str, Any] | None

    @property
    def analysis(self) -> TraceAnalysis | None:
        """``summary`` read as a ``perfkit.trace.TraceAnalysis`` (None when absent or unreadable)."""
        if self.summary is None:
            return None
        from ..trace import TraceAnalysis  # the trace analyser loads only when a report asks

        try:
            return TraceAnalysis.from_dict(self.summary)
        except ValueError:
            return None


@dataclass(frozen=True)
class RunData:
    """Everything a run directory holds; ``problems`` says what is missing or was skipped."""

    path: Path
    meta: Mapping[str, Any]
    windows: tuple[RunWindow, ...]
    traces: tuple[RunTrace, ...]
    final: Snapshot | None
    problems: tuple[str, ...]


def read_run(path: str | os.PathLike[str]) -> RunData:
    """Read and check the run directory ``path``.

    Raises ``FileNotFoundError`` (no directory, no ``windows.jsonl``, a snapshot it names is
    missing) or ``ValueError`` (a file that does not parse), each naming the file.

    >>> read_run("no/such/run")
    Traceback (most recent call last):
    ...
    FileNotFoundError: run directory no/such/run does not exist
    """
    root = Path(path)
    if not root.is_dir():
        raise FileNotFoundError(f"run directory {root} does not exist")
    problems: list[str] = []
    meta = _read_json(root / "run.json", problems)
    windows_file = root / "windows.jsonl"
    if not windows_file.is_file():
        raise FileNotFoundError(
            f"{windows_file} is missing: no window of this run finished, or it is not a perfkit run directory"
        )
    windows = tuple(_window(root, n, line) for n, line in _lines(windows_file, problems))
    traces_file = root / "traces.jsonl"
    traces = (
        tuple(_trace(root, n, x) for n, x in _lines(traces_file, problems)) if traces_file.exists() else ()
    )
    final = None
    if (root / "final.json").exists():
        final = _snapshot(root / "final.json")
    else:
        problems.append("final.json is missing: the run did not finish (killed, or still running)")
    return RunData(root, meta or {}, windows, traces, final, tuple(problems))


def _read_json(file: Path, problems: list[str]) -> dict[str, Any] | None:
    if not file.exists():
        problems.append(f"{file.name} is missing")
        return None
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{file}: not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise ValueError(f"{file}: expected a JSON object, got {type(data).__name__}")
    return data


def _lines(file: Path, problems: list[str]) -> list[tuple[str, dict[str, Any]]]:
    """The JSON objects of ``file`` with their ``"FILE line N"`` labels; a truncated last line is noted."""
    try:
        text = file.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{file}: not UTF-8 text ({exc})") from None
    lines = text.split("\n")
    out = []
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        where = f"{file} line {i + 1}"
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            if i == len(lines) - 1:  # no newline after it: the writer was killed mid-line
                problems.append(f"{file.name} line {i + 1} is truncated (the run was killed): skipped")
                continue
            raise ValueError(f"{where}: not JSON ({exc})") from None
        if not isinstance(data, dict):
            raise ValueError(f"{where}: expected a JSON object, got {type(data).__name__}")
        out.append((where, data))
    return out


def _window(root: Path, where: str, line: Mapping[str, Any]) -> RunWindow:
    stage = _field(line, "stage" if "stage" in line else "phase", str, where)
    snapshot_file = _field(line, "snapshot", str, where)
    file = root / snapshot_file
    if not file.is_file():
        raise FileNotFoundError(f"{file} is missing (the snapshot of {stage} in {where})")
    _field(line, "epoch", int, where)
    _field(line, "wall_s", (int, float), where)
    prefix = line.get("prefix")
    snapshot = _snapshot(file)
    try:
        window = StageWindow.from_dict(line, snapshot)
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"{where}: not a stage window ({exc!r})") from None
    return RunWindow(
        window=window,
        step=_int_or_none(line.get("step")),
        prefix=prefix if isinstance(prefix, str) else None,
        start_ns=_field(line, "start_ns", int, where),
        end_ns=_field(line, "end_ns", int, where),
        metrics=_metrics(_field(line, "metrics", dict, where), where),
        snapshot_file=snapshot_file,
    )


def _trace(root: Path, where: str, line: Mapping[str, Any]) -> RunTrace:
    summary = line.get("summary")
    if summary is not None and not isinstance(summary, dict):
        raise ValueError(f"{where}: 'summary' must be an object or null, got {summary!r}")
    trace = Path(_field(line, "trace", str, where))
    if not trace.is_absolute() and (root / trace).exists():
        trace = root / trace
    return RunTrace(
        stage=_field(line, "stage" if "stage" in line else "phase", str, where),
        epoch=_field(line, "epoch", int, where),
        rank=_int_or_none(line.get("rank")) or 0,
        trace=trace,
        summary=summary,
    )


def _field(line: Mapping[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
    value = line.get(key)
    if not isinstance(value, kind) or isinstance(value, bool):
        raise ValueError(f"{where}: {key!r} is missing or not {_KINDS[kind]} (got {value!r})")
    return value


_KINDS: dict[type | tuple[type, ...], str] = {
    str: "a string",
    int: "an integer",
    dict: "an object",
    (int, float): "a number",
}


def _int_or_none(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _metrics(metrics: Mapping[str, Any], where: str) -> dict[str, float]:
    bad = [k for k, v in metrics.items() if not isinstance(v, (int, float)) or isinstance(v, bool)]
    if bad:
        raise ValueError(f"{where}: metric {bad[0]!r} is not a number (got {metrics[bad[0]]!r})")
    return {k: float(v) for k, v in metrics.items()}


def _snapshot(file: Path) -> Snapshot:
    try:
        return Snapshot.from_json(file.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{file}: not JSON ({exc})") from None
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"{file}: not a perfkit snapshot ({exc!r})") from None
