"""Time and peak memory of ``perfkit analyze`` on the largest shared real trace (and of HTA, if given).

    python benchmarks/bench_analyze.py [TRACE] [--repeat 3] [--hta /tmp/hta/bin/python] [--perfkit-path DIR]

Each run is a fresh process (``python -m perfkit analyze TRACE --json``), so its peak RSS
(``resource.getrusage`` in that process) is the whole cost: interpreter, numpy and the analysis;
the import alone is measured too. Without TRACE the largest trace (uncompressed) under
``../shared/traces`` is used. ``--hta PYTHON`` runs Holistic Trace Analysis in another
interpreter (a scratch venv: ``python3 -m venv /tmp/hta && /tmp/hta/bin/pip install
HolisticTraceAnalysis``; never a dependency of perfkit) on the same trace: parse, temporal and
idle-time breakdowns. ``--perfkit-path`` puts another checkout first on ``PYTHONPATH`` (to compare
with an older perfkit).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT / ".." / "shared" / "traces"
# Runs in the child: the work, then its own peak RSS (ru_maxrss is KiB on Linux) and wall time.
_MEASURE = """
import resource, sys, time
t0 = time.perf_counter()
{work}
wall = time.perf_counter() - t0
print(f"@@ {{wall:.3f}} {{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.1f}}", file=sys.stderr)
"""
_PERFKIT = """
from perfkit._cli import main
import contextlib, io
with contextlib.redirect_stdout(io.StringIO()):
    code = main(["analyze", sys.argv[1], "--json"])
assert code == 0, code
"""
_IMPORT = "import perfkit.trace, perfkit._cli"
_HTA = """
import logging, os, shutil, tempfile
logging.disable(logging.WARNING)
from hta.trace_analysis import TraceAnalysis
d = tempfile.mkdtemp()
os.symlink(sys.argv[1], os.path.join(d, os.path.basename(sys.argv[1])))
t = TraceAnalysis(trace_dir=d, include_last_profiler_step=True)
t.get_temporal_breakdown(visualize=False)
t.get_idle_time_breakdown(ranks=list(t.t.get_all_traces()), visualize=False)  # the trace's rank, not 0
shutil.rmtree(d)
"""


def largest_trace() -> Path:
    """The shared trace with most bytes once decompressed (gzip keeps that size in its last 4 bytes)."""
    files = sorted(SHARED.glob("*/*.json.gz"))
    if not files:
        raise SystemExit(f"no traces in {SHARED}; pass one")

    def size(p: Path) -> int:
        with p.open("rb") as fh:
            fh.seek(-4, os.SEEK_END)
            return int.from_bytes(fh.read(4), "little")

    return max(files, key=size)


def measure(python: str, work: str, trace: Path, env: dict[str, str]) -> tuple[float, float]:
    """(seconds, peak RSS MiB) of ``work`` in a fresh ``python``."""
    done = subprocess.run(
        [python, "-c", _MEASURE.format(work=work), str(trace)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        cwd=tempfile.gettempdir(),
    )
    lines = [line for line in done.stderr.splitlines() if line.startswith("@@ ")]
    if done.returncode != 0 or not lines:
        raise SystemExit(f"{python} failed:\n{done.stderr[-2000:]}")
    wall, rss = lines[-1].split()[1:]
    return float(wall), float(rss)


def row(label: str, runs: list[tuple[float, float]]) -> str:
    walls = [w for w, _ in runs]
    return f"| {label} | {min(walls):.2f} | {statistics.median(walls):.2f} | {max(r for _, r in runs):.0f} |"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace", nargs="?", type=Path)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--hta", metavar="PYTHON", help="an interpreter with HolisticTraceAnalysis installed")
    parser.add_argument("--perfkit-path", type=Path, default=ROOT, help="the perfkit checkout to run")
    args = parser.parse_args(argv)
    trace = (args.trace or largest_trace()).resolve()
    env = {**os.environ, "PYTHONPATH": str(args.perfkit_path.resolve())}
    print(
        f"trace: {trace} ({trace.stat().st_size / 1e6:.1f} MB gzip), {args.repeat} runs each, fresh processes"
    )
    print("| what | best s | median s | peak RSS MiB |")
    print("|---|---:|---:|---:|")
    print(row("import perfkit (baseline)", [measure(sys.executable, _IMPORT, trace, env)]))
    print(
        row(
            "perfkit analyze --json",
            [measure(sys.executable, _PERFKIT, trace, env) for _ in range(args.repeat)],
        )
    )
    if args.hta:
        hta_env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        print(
            row(
                "HTA 0.5: parse + temporal + idle breakdown",
                [measure(args.hta, _HTA, trace, hta_env) for _ in range(args.repeat)],
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
