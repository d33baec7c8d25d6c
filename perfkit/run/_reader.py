"""Reading a run directory back (the format ``RunWriter`` writes), checking every file on the way.

    run = read_run("lightning_logs/version_0/perfkit-run")
    [(w.stage, w.epoch, w.metric("step_ms_p95")) for w in run.windows]
    run.problems        # ('final.json is missing: ...',) for a run that was killed

Nothing in a run directory can make the reader fail on the rest of it: a line
that is torn or not JSON (a killed run, a full disk), a window whose snapshot is
missing, broken or points outside the directory, a ``run.json`` left empty, are
each skipped and listed in ``problems``, with the windows the writer numbered but
never completed. Only a path that is not a run directory raises, and a file of a format this
perfkit does not read (``perfkit._formats``: ``run.json``'s ``RUN_FORMAT``, a snapshot's, a trace
analysis's), which is refused whole rather than misread.

A directory two jobs wrote (two processes given the same run directory) is read one job at
a time (``job=``, default the newest): the other jobs are named in ``problems`` and
``jobs``, never counted in with this one (see ``_jobs``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from .._display import display_name
from .._formats import ANALYSIS_FORMAT, RUN_FORMAT, FormatError, check_format
from .._rule import Verdict
from .._snapshot import Snapshot
from ..loaders import TrialResult
from ..stages import Account, StageWindow
from ._data import RunData, RunInterval, RunTrace, RunWindow
from ._jobs import RunJob, job_of, jobs_problem, list_jobs, pick
from ._layout import FINAL_FILE, INTERVALS_FILE, RUN_FILE, TRACES_FILE, TRIALS_FILE, WINDOWS_FILE, own
from ._lost import missing_windows


def read_run(path: str | os.PathLike[str], *, job: str | None = None) -> RunData:
    """Read and check the run directory ``path``: what can be read is returned, what cannot is
    listed in ``problems`` (a torn or corrupt line, a window whose snapshot is missing, broken
    or outside the directory, windows the writer could not write, a missing ``final.json``).

    ``job`` picks one of the jobs that wrote the directory (``RunData.jobs``: its id, or the
    start of it such as its pid); by default the newest one that finished a window. The other
    jobs' windows are left out, and named first in ``problems``: two jobs are never one run.

    Raises ``FileNotFoundError`` when ``path`` is not a run directory (no such directory, or
    neither ``run.json`` nor ``windows.jsonl`` in it), and ``FormatError`` (a ``ValueError``) for
    a file in a format this perfkit does not read.

    >>> read_run("no/such/run")
    Traceback (most recent call last):
    ...
    FileNotFoundError: run directory no/such/run does not exist
    """
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path must be a str or os.PathLike (a run directory), got {path!r}")
    root = Path(path)
    if root.exists() and not root.is_dir():
        raise NotADirectoryError(f"{root} is a file: give its run directory ({root.parent})")
    if not root.is_dir():
        raise FileNotFoundError(f"run directory {root} does not exist")
    problems: list[str] = []
    windows_file = root / WINDOWS_FILE
    if not windows_file.is_file() and not (root / RUN_FILE).is_file():
        raise FileNotFoundError(
            f"{windows_file} is missing: no window of this run finished, or it is not a perfkit run directory"
        )
    meta = _meta(root / RUN_FILE, problems)
    lines = _lines(windows_file, problems)
    trace_lines = _lines(root / TRACES_FILE, problems)
    jobs = list_jobs(meta, [line for _, line in lines])
    chosen = pick(jobs, job)
    mine = chosen.id if chosen is not None else ""
    said = jobs_problem(jobs, chosen) if chosen is not None else None
    problems[:0] = [said] if said else []
    lines = [(n, line) for n, line in lines if job_of(line) == mine]
    windows: list[RunWindow] = []
    if windows_file.is_file():
        windows = [w for n, line in lines if (w := _or_problem(problems, n, _window, root, n, line))]
        missing_windows(lines, meta, problems, mine)
    else:
        problems.append(f"{WINDOWS_FILE} is missing: no window of this run finished")
    traces = [
        t for n, x in trace_lines if job_of(x) == mine and (t := _or_problem(problems, n, _trace, root, n, x))
    ]
    final = _final(root, jobs, chosen, problems)
    intervals = [
        x
        for file in sorted(root.glob(own(INTERVALS_FILE, "*")))
        for n, line in _lines(file, problems)
        if job_of(line) == mine and (x := _or_problem(problems, n, _interval, n, line))
    ]
    intervals.sort(key=lambda x: x.start_ns)
    trials = [
        r
        for n, x in _lines(root / TRIALS_FILE, problems)
        if job_of(x) == mine and (r := _or_problem(problems, n, TrialResult.from_dict, x))
    ]
    return RunData(
        root,
        meta,
        tuple(windows),
        tuple(traces),
        final,
        tuple(problems),
        mine,
        tuple(jobs),
        tuple(intervals),
        tuple(trials),
    )


def _interval(where: str, line: Mapping[str, Any]) -> RunInterval:
    steps = _field(line, "steps", list, where)
    if len(steps) != 2 or not all(isinstance(x, int) for x in steps):
        raise ValueError(f"{where}: 'steps' must be [first, last], got {steps!r}"[:300])
    account = _field(line, "account", dict, where)
    wall = float(_field(line, "wall_s", (int, float), where))
    return RunInterval(
        stage=_field(line, "stage", str, where),
        epoch=_field(line, "epoch", int, where),
        steps=(steps[0], steps[1]),
        step=_int_or_none(line.get("step")),
        wall_s=wall,
        samples=_int_or_none(line.get("samples")),
        account=Account.from_dict(account),
        metrics=_metrics(_field(line, "metrics", dict, where), where),
        verdicts=tuple(Verdict.from_dict(v) for v in line.get("verdicts") or () if isinstance(v, dict)),
        prefix=str(line.get("prefix") or "perf"),
        start_ns=_field(line, "start_ns", int, where),
        end_ns=_field(line, "end_ns", int, where),
        merged=_int_or_none(line.get("merged")) or 1,
    )


def _final(root: Path, jobs: list[RunJob], chosen: RunJob | None, problems: list[str]) -> Snapshot | None:
    """The job's ``final{suffix}.json``; ``final.json`` when ``run.json`` names no job as its writer
    (it is missing or broken, so several jobs have no suffix) is nobody's."""
    name = own(FINAL_FILE, chosen.suffix if chosen is not None else "")
    if chosen is not None and not chosen.suffix and sum(not j.suffix for j in jobs) > 1:
        problems.append(
            f"{FINAL_FILE} is left out: {RUN_FILE} does not say which of the jobs wrote it, so it may be "
            "another job's (the windows below are this job's own)"
        )
        return None
    if (root / name).is_file():
        return _or_problem(problems, name, _snapshot, root / name)
    problems.append(f"{name} is missing: the run did not finish (killed, or still running)")
    return None


T = TypeVar("T")


def _or_problem(problems: list[str], where: str, read: Callable[..., T], *args: Any) -> T | None:
    """``read(*args)``, or None with the reason in ``problems`` (the rest of the run still reads);
    a file of another format is refused whole (``FormatError``)."""
    try:
        return read(*args)
    except FormatError:
        raise
    except (OSError, ValueError, KeyError, TypeError, ArithmeticError, RecursionError) as exc:
        reason = _reason(exc)
        problems.append(f"{reason if reason.startswith(where) else f'{where}: {reason}'}: skipped")
        return None


def _reason(exc: BaseException) -> str:
    if isinstance(exc, FileNotFoundError):
        return str(exc)
    if isinstance(exc, OSError):
        return f"cannot be read ({exc.strerror or exc})"
    return str(exc)[:300] if isinstance(exc, ValueError) else f"malformed ({exc!r})"[:300]


def _meta(file: Path, problems: list[str]) -> dict[str, Any]:
    """``run.json``: of another format it is refused (``FormatError``); missing, unreadable or not
    perfkit's (no format number), it is left out and listed in ``problems``."""
    if not file.exists():
        problems.append(f"{file.name} is missing")
        return {}
    try:
        data = json.loads(file.read_text(encoding="utf-8") or "null")
    except (OSError, ValueError, RecursionError) as exc:
        problems.append(f"{file.name} cannot be read ({_reason(exc)}): its metadata is left out")
        return {}
    if not isinstance(data, dict):
        what = (
            "is empty (a write cut short)"
            if data is None
            else f"is not a JSON object ({type(data).__name__})"
        )
        problems.append(f"{file.name} {what}: its metadata is left out")
        return {}
    try:
        check_format(str(file), data, RUN_FORMAT)
    except FormatError:
        raise
    except ValueError:
        problems.append(f"{file.name} has no format number (not perfkit's): its metadata is left out")
        return {}
    return data


def _lines(file: Path, problems: list[str]) -> list[tuple[str, dict[str, Any]]]:
    """The JSON objects of ``file`` with their ``"FILE line N"`` labels; the others are listed
    (none for a file that is not there).

    A line cut short (a killed run, a full disk) is skipped wherever it is: a writer that
    could write again started a fresh line after it.
    """
    if not file.is_file():
        return []
    try:
        text = file.read_bytes().decode("utf-8", errors="replace")
    except OSError as exc:
        problems.append(f"{file.name} cannot be read ({_reason(exc)}): skipped")
        return []
    lines = text.split("\n")
    out = []
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        where = f"{file.name} line {i + 1}"
        try:
            data = json.loads(line)
        except (ValueError, RecursionError):
            last = i == len(lines) - 1  # no newline after it: the writer was killed mid-line
            why = "is truncated (the run was killed)" if last else "is torn or not JSON (a write cut short?)"
            problems.append(f"{file.name} line {i + 1} {why}: skipped")
            continue
        if not isinstance(data, dict):
            problems.append(f"{file.name} line {i + 1} is not a JSON object: skipped")
            continue
        out.append((where, data))
    return out


def _inside(root: Path, name: str, where: str, what: str) -> Path:
    """``root / name``, refused when ``name`` leads out of the run directory."""
    file = (root / name).resolve()
    if Path(name).is_absolute() or not file.is_relative_to(root.resolve()):
        raise ValueError(f"{what} {name!r} is outside the run directory (refused)")
    return file


def _window(root: Path, where: str, line: Mapping[str, Any]) -> RunWindow:
    stage = _field(line, "stage", str, where)
    snapshot_file = _field(line, "snapshot", str, where)
    epoch = _field(line, "epoch", int, where)
    what = f"the snapshot of {display_name(stage)} epoch {epoch}"
    file = _inside(root, snapshot_file, where, what)
    if not file.is_file():
        raise FileNotFoundError(f"{what}, {display_name(snapshot_file)}, is missing")
    wall = _field(line, "wall_s", (int, float), where)
    if not 0 <= wall < float("inf"):
        raise ValueError(f"{where}: 'wall_s' must be a finite number >= 0, got {wall!r}")
    prefix = _field(line, "prefix", str, where)
    snapshot = _snapshot(file)
    try:
        window = StageWindow.from_dict(line, snapshot)
    except (KeyError, TypeError, ValueError, ArithmeticError) as exc:
        raise ValueError(f"{where}: not a stage window ({exc!r})") from None
    return RunWindow(
        window=window,
        step=_int_or_none(line.get("step")),
        prefix=prefix,
        start_ns=_field(line, "start_ns", int, where),
        end_ns=_field(line, "end_ns", int, where),
        metrics=_metrics(_field(line, "metrics", dict, where), where),
        snapshot_file=snapshot_file,
        job=job_of(line),
        writer=line.get("writer") if isinstance(line.get("writer"), str) else None,
    )


def _trace(root: Path, where: str, line: Mapping[str, Any]) -> RunTrace:
    summary = line.get("summary")
    if summary is not None and not isinstance(summary, dict):
        raise ValueError(f"{where}: 'summary' must be an object or null, got {summary!r}"[:300])
    if summary is not None:
        check_format(f"the trace analysis of {root / where}", summary, ANALYSIS_FORMAT, unnumbered=1)
    trace = Path(_field(line, "trace", str, where))
    if not trace.is_absolute() and (root / trace).exists():
        trace = root / trace
    return RunTrace(
        stage=_field(line, "stage", str, where),
        epoch=_field(line, "epoch", int, where),
        rank=_int_or_none(line.get("rank")) or 0,
        trace=trace,
        summary=summary,
    )


def _field(line: Mapping[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
    value = line.get(key)
    if not isinstance(value, kind) or isinstance(value, bool):
        raise ValueError(f"{where}: {key!r} is missing or not {_KINDS[kind]} (got {value!r})"[:300])
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
        raise ValueError(f"{where}: metric {bad[0]!r} is not a number (got {metrics[bad[0]]!r})"[:300])
    return {k: float(v) for k, v in metrics.items()}  # an int past float's range: OverflowError, listed


def _snapshot(file: Path) -> Snapshot:
    try:
        return Snapshot.from_json(file.read_text(encoding="utf-8", errors="replace"))
    except FormatError as exc:
        raise FormatError(f"{file}: {exc}") from None
    except ValueError as exc:
        raise ValueError(f"{file.name}: {exc}") from None
