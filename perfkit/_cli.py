"""The ``perfkit`` command line: one small function per subcommand registers its parser.

    perfkit analyze profiler_traces/train_epoch1.pt.trace.json.gz --top-k 5
    perfkit analyze traces_of_all_ranks/ --json
    perfkit diff before.pt.trace.json.gz after.pt.trace.json.gz --json
    perfkit report lightning_logs/version_0/perfkit -o report.html
    perfkit summary lightning_logs/version_0 --json
    perfkit summary runs/exp1 --job 4121          # a directory two jobs wrote: pick one
    perfkit compare runs/baseline runs/more_workers
    perfkit run -- python train.py --lr 0.1         # times the script unchanged, then its verdicts
    perfkit trial mypkg.data:make_loader --need 120 # the loader alone at each worker count: which keeps up

A new subcommand is a ``_add_<name>(subparsers)`` function that sets ``run`` (a callable taking
the parsed arguments, printing, returning the exit code) and one entry in ``_COMMANDS``. Bad
input ends with one line on stderr and exit code 2, never a traceback. Exit codes: 0 done, 2 bad input
(a missing or broken file, a bad argument), 1 an internal error (a bug: please report it).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TextIO, TypeAlias

from .names import RUN_DIR_NAME
from .run import WINDOWS_FILE, locate_run, readable_run

# The type of the object ``add_subparsers()`` returns; each ``_add_<name>`` receives it.
Subparsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


def main(argv: list[str] | None = None) -> int:
    """Run the command line ``argv`` (default: ``sys.argv[1:]``); returns the exit code.

    >>> main(["analyze", "no/such/trace.json"])
    2
    """
    parser = argparse.ArgumentParser(prog="perfkit", description="Find where a PyTorch loop spends its time.")
    parser.add_argument("--version", action="version", version=_version())
    subparsers = parser.add_subparsers(title="commands", metavar="COMMAND")
    for add in _COMMANDS:
        add(subparsers)
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse has printed usage and the error (or --help)
        return exc.code if isinstance(exc.code, int) else 2
    run: Callable[[argparse.Namespace], int] | None = getattr(args, "run", None)
    if run is None:
        parser.print_usage(sys.stderr)
        print("perfkit: error: a command is required", file=sys.stderr)
        return 2
    try:
        code = run(args)
        sys.stdout.flush()  # here, so a reader that stopped early is seen here and not at exit
        return code
    except BrokenPipeError:  # the reader stopped reading (``perfkit summary RUN | head``): not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
        return 0
    except (OSError, ValueError) as exc:
        print(f"perfkit: error: {exc}", file=sys.stderr)
        return 2


def _add_analyze(subparsers: Subparsers) -> None:
    p = subparsers.add_parser(
        "analyze",
        help="summarise a torch.profiler Chrome trace (.json or .json.gz) or a directory of one per rank",
    )
    p.add_argument("trace", metavar="TRACE_OR_DIR")
    _add_output_options(p)
    p.set_defaults(run=_analyze)


def _analyze(args: argparse.Namespace) -> int:
    from .reports import analysis_text, ranks_text
    from .trace import analyze_ranks, analyze_trace

    if Path(args.trace).is_dir():
        ranks = analyze_ranks(args.trace, top_k=args.top_k)
        print(_json(ranks.to_dict()) if args.json else ranks_text(ranks))
        return 0
    analysis = analyze_trace(args.trace, top_k=args.top_k)
    print(_json(analysis.to_dict()) if args.json else analysis_text(analysis))
    return 0


def _add_diff(subparsers: Subparsers) -> None:
    p = subparsers.add_parser("diff", help="compare two traces per step: parts, CPU ops and device kernels")
    p.add_argument("trace_a", metavar="TRACE_A")
    p.add_argument("trace_b", metavar="TRACE_B")
    _add_output_options(p)
    p.set_defaults(run=_diff)


def _diff(args: argparse.Namespace) -> int:
    from .reports import diff_text
    from .trace import diff_traces

    diff = diff_traces(args.trace_a, args.trace_b, top_k=args.top_k)
    print(_json(diff.to_dict()) if args.json else diff_text(diff))
    return 0


def _json(data: object) -> str:
    # Strict JSON: a NaN or infinity would be a bug in the analysis, not something to print.
    return json.dumps(data, indent=2, allow_nan=False)


def _add_report(subparsers: Subparsers) -> None:
    p = subparsers.add_parser("report", help="write a run directory's HTML report (one self-contained file)")
    p.add_argument("run_dir", metavar="RUN_DIR")
    p.add_argument("-o", "--out", metavar="FILE", help="where to write it (default RUN_DIR/report.html)")
    _add_job_option(p)
    p.set_defaults(run=_report)


def _report(args: argparse.Namespace) -> int:
    from .reports import write_html_report

    try:
        run_dir, others = locate_run(args.run_dir)
        path = write_html_report(run_dir, args.out, job=args.job)
    except (ImportError, OSError, ValueError) as exc:  # matplotlib missing; not a run directory
        print(f"perfkit: error: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # a fault of perfkit's own: one line, exit 1 (bad input is 2)
        print(f"perfkit: internal error: cannot report {args.run_dir}: {exc!r}"[:500], file=sys.stderr)
        return 1
    print(path)
    _say_others(args.run_dir, others, "report", sys.stderr)
    return 0


def _add_summary(subparsers: Subparsers) -> None:
    p = subparsers.add_parser("summary", help="a run directory's verdicts and time account, in the terminal")
    p.add_argument(
        "run_dir",
        metavar="RUN_DIR",
        help="a run directory, or a folder above runs (the newest is summarised)",
    )
    p.add_argument("--json", action="store_true", help="print the diagnosis as JSON (docs/diagnosis.md)")
    _add_job_option(p)
    p.set_defaults(run=_summary)


def _summary(args: argparse.Namespace) -> int:
    from .findings import diagnose
    from .reports import diagnosis_text

    run_dir, others = locate_run(args.run_dir)
    run = readable_run(str(run_dir), job=args.job)
    diagnosis = diagnose(run)
    if args.json:
        jobs = [j.to_dict() for j in run.jobs]
        print(
            json.dumps(
                {**diagnosis.to_dict(), "problems": list(run.problems), "job": run.job, "jobs": jobs},
                indent=2,
            )
        )
    else:
        print(diagnosis_text(run, diagnosis))
    _say_others(args.run_dir, others, "summary", sys.stderr if args.json else sys.stdout)
    return 0


def _add_compare(subparsers: Subparsers) -> None:
    p = subparsers.add_parser("compare", help="compare two run directories: what changed, beyond the noise")
    p.add_argument("run_a", metavar="RUN_A", help="the run before")
    p.add_argument("run_b", metavar="RUN_B", help="the run after")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    p.add_argument("--job-a", metavar="ID", help="the job of RUN_A to read (default: its newest)")
    p.add_argument("--job-b", metavar="ID", help="the job of RUN_B to read (default: its newest)")
    p.add_argument(
        "--fail-on-regression",
        metavar="PCT",
        type=float,
        help=f"exit {REGRESSED} when a stage's time per step grew past PCT%% beyond its noise (CI gates)",
    )
    p.set_defaults(run=_compare)


def _compare(args: argparse.Namespace) -> int:
    from .findings import compare_runs
    from .reports import comparison_text

    (dir_a, others_a), (dir_b, others_b) = locate_run(args.run_a), locate_run(args.run_b)
    a, b = readable_run(str(dir_a), job=args.job_a), readable_run(str(dir_b), job=args.job_b)
    stages_a, stages_b = {w.stage for w in a.windows}, {w.stage for w in b.windows}
    if not stages_a & stages_b:
        raise ValueError(
            f"nothing to compare: {args.run_a} has {sorted(stages_a)}, {args.run_b} has {sorted(stages_b)}"
        )
    comparison = compare_runs(a, b)
    print(json.dumps(comparison.to_dict(), indent=2) if args.json else comparison_text(comparison))
    _say_others(args.run_a, others_a, "summary", sys.stderr)
    _say_others(args.run_b, others_b, "summary", sys.stderr)
    gate = args.fail_on_regression
    return REGRESSED if gate is not None and comparison.worst_growth * 100 > gate else 0


INTERRUPTED = 130
"""The exit code of a command stopped with Ctrl-C (128 + SIGINT): stopped, not failed."""

REGRESSED = 3
"""``perfkit compare --fail-on-regression PCT``'s exit code when a stage slowed past PCT%."""


def _add_run(subparsers: Subparsers) -> None:
    p = subparsers.add_parser(
        "run",
        help="run a training command unchanged, timing its DataLoaders, then print its verdicts",
        description="perfkit run [--run-dir DIR] [--no-console] -- python train.py ARGS "
        "(or: python -m module ARGS, torchrun ... train.py ARGS, train.py ARGS)",
    )
    p.add_argument("--run-dir", metavar="DIR", default=RUN_DIR_NAME, help=f"default ./{RUN_DIR_NAME}")
    p.add_argument("--no-console", action="store_true", help="print nothing (verdicts.json is still written)")
    p.add_argument("command", nargs=argparse.REMAINDER, metavar="-- COMMAND...")
    p.set_defaults(run=_run)


def _run(args: argparse.Namespace) -> int:
    from .autorun import LaunchError, launch

    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        print("perfkit: error: run needs a command: perfkit run -- python train.py ARGS", file=sys.stderr)
        return 2
    run_dir = Path(args.run_dir)
    before = _size(run_dir / WINDOWS_FILE)
    try:
        code = launch(command, run_dir)
    except LaunchError as exc:
        print(f"perfkit: error: {exc}", file=sys.stderr)
        return exc.code
    if _size(run_dir / WINDOWS_FILE) == before:
        said = (
            f"perfkit run: no DataLoader was iterated: nothing timed, {run_dir} not written. A loop over "
            "batches of its own (a generator, np.memmap slices) becomes a stage where the script says so: "
            "with perfkit.window('train', epoch=epoch) as w: for batch in w.iterate(batches): ... "
            "(docs/quickstart.md)"
        )
    else:
        said = _verdicts(run_dir)
    if code not in (0, INTERRUPTED):  # a failed command is the first thing to know about its run
        said = (
            f"perfkit run: the command failed (exit {code}): the verdicts below judge only what ran "
            f"before it did\n{said}"
        )
    if not args.no_console:
        print(said, file=sys.stderr)
    return code


def _add_trial(subparsers: Subparsers) -> None:
    p = subparsers.add_parser(
        "trial",
        help="time a DataLoader alone at each worker count and pick the smallest setting that keeps up",
        description="perfkit trial MODULE:FACTORY, FACTORY a callable returning a DataLoader, or a "
        "Lightning datamodule class or instance (setup('fit'), then its train or --loader val loader)",
    )
    p.add_argument("factory", metavar="MODULE:FACTORY")
    p.add_argument("--loader", choices=("train", "val"), default="train", help="a datamodule's loader to try")
    p.add_argument("--budget-s", type=float, default=30.0, metavar="S", help="the trial's time (default 30)")
    p.add_argument("--need", type=float, metavar="BATCHES_PER_S", help="the rate the training loop consumed")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    p.set_defaults(run=_trial)


def _trial(args: argparse.Namespace) -> int:
    from .reports import trial_text
    from .torch import load_loader, trial

    loader = load_loader(args.factory, args.loader)
    result = trial(loader, name=args.loader, need_batches_per_s=args.need, budget_s=args.budget_s)
    print(_json(result.to_dict()) if args.json else trial_text(result))
    return 0


def _verdicts(run_dir: Path) -> str:
    """What ``perfkit summary`` prints of the run ``perfkit run`` just wrote (its newest job),
    after writing its ``verdicts.json``."""
    from .findings import diagnose, write_diagnosis
    from .reports import diagnosis_text

    write_diagnosis(run_dir)
    run = readable_run(str(run_dir))
    return diagnosis_text(run, diagnose(run))


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return -1


def _say_others(given: str, others: list[Path], command: str, out: TextIO) -> None:
    """One line naming the runs below ``given`` that were not read, and how to read one."""
    if not others:
        return
    shown = ", ".join(str(p) for p in others[:SHOWN]) + (", ..." if len(others) > SHOWN else "")
    runs = "run" if len(others) == 1 else "runs"
    print(f"{len(others)} other {runs} below {given}: {shown} (perfkit {command} PATH)", file=out)


SHOWN = 5
"""Other runs named by path in that line."""


def _version() -> str:
    from . import __version__, hot_path

    return f"perfkit {__version__}, hot path: {hot_path()}"


def _add_output_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--top-k", type=_positive_int, default=10, metavar="N", help="rows per table (default 10)")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")


def _add_job_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--job",
        metavar="ID",
        help="of a run directory several jobs wrote, the one to read: its id or pid (default: the newest)",
    )


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1, got {text!r}")
    return value


_COMMANDS: tuple[Callable[[Subparsers], None], ...] = (
    _add_analyze,
    _add_diff,
    _add_report,
    _add_summary,
    _add_compare,
    _add_run,
    _add_trial,
)
