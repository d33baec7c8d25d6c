"""The ``perfkit`` command line: one small function per subcommand registers its parser.

    perfkit analyze profiler_traces/train_epoch1.pt.trace.json.gz --top-k 5
    perfkit diff before.pt.trace.json.gz after.pt.trace.json.gz --json
    perfkit report lightning_logs/version_0/perfkit -o report.html

A new subcommand is a ``_add_<name>(subparsers)`` function that sets ``run`` (a callable taking
the parsed arguments, printing, returning the exit code) and one entry in ``_COMMANDS``. Bad
input ends with one line on stderr and exit code 2, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import TypeAlias

# The type of the object ``add_subparsers()`` returns; each ``_add_<name>`` receives it.
Subparsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


def main(argv: list[str] | None = None) -> int:
    """Run the command line ``argv`` (default: ``sys.argv[1:]``); returns the exit code.

    >>> main(["analyze", "no/such/trace.json"])
    2
    """
    parser = argparse.ArgumentParser(prog="perfkit", description="Find where a PyTorch loop spends its time.")
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
        return run(args)
    except (OSError, ValueError) as exc:
        print(f"perfkit: error: {exc}", file=sys.stderr)
        return 2


def _add_analyze(subparsers: Subparsers) -> None:
    p = subparsers.add_parser("analyze", help="summarise a torch.profiler Chrome trace (.json or .json.gz)")
    p.add_argument("trace", metavar="TRACE")
    _add_output_options(p)
    p.set_defaults(run=_analyze)


def _analyze(args: argparse.Namespace) -> int:
    from .trace import analyze_trace, format_analysis

    analysis = analyze_trace(args.trace, top_k=args.top_k)
    print(json.dumps(analysis.to_dict(), indent=2) if args.json else format_analysis(analysis))
    return 0


def _add_diff(subparsers: Subparsers) -> None:
    p = subparsers.add_parser("diff", help="compare two traces per step")
    p.add_argument("trace_a", metavar="TRACE_A")
    p.add_argument("trace_b", metavar="TRACE_B")
    _add_output_options(p)
    p.set_defaults(run=_diff)


def _diff(args: argparse.Namespace) -> int:
    from .trace import diff_traces, format_diff

    diff = diff_traces(args.trace_a, args.trace_b, top_k=args.top_k)
    print(json.dumps(diff.to_dict(), indent=2) if args.json else format_diff(diff))
    return 0


def _add_report(subparsers: Subparsers) -> None:
    p = subparsers.add_parser("report", help="write a run directory's HTML report (one self-contained file)")
    p.add_argument("run_dir", metavar="RUN_DIR")
    p.add_argument("-o", "--out", metavar="FILE", help="where to write it (default RUN_DIR/report.html)")
    p.set_defaults(run=_report)


def _report(args: argparse.Namespace) -> int:
    from .reports import write_html_report

    try:
        path = write_html_report(args.run_dir, args.out)
    except (ImportError, OSError, ValueError) as exc:  # matplotlib missing; not a run directory
        print(f"perfkit: error: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # what the reader let through must still be one line, never a traceback
        print(f"perfkit: error: cannot report {args.run_dir}: {exc!r}"[:500], file=sys.stderr)
        return 2
    print(path)
    return 0


def _add_output_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--top-k", type=_positive_int, default=10, metavar="N", help="rows per table (default 10)")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")


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
)
