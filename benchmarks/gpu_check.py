"""The GPU check: planted causes on a real GPU, the check's own truth beside perfkit's figures, one table.

    make gpu-check                                     # on a GPU machine, from the repository root
    PYTHONPATH=. PERFKIT_PURE=1 python3 benchmarks/gpu_check.py [--out FILE.md] [--only NAME ...]
    PYTHONPATH=. python3 benchmarks/gpu_check.py --device cpu      # the harness on CPU, events faked

Needs torch (and, for the NVML row, nvidia-ml-py); perfkit runs from this checkout, not installed.
Each scenario runs its loop through ``perfkit.window`` and ``perfkit.findings.diagnose_windows``,
measures its truth with its own clock and CUDA events, and fills one row: the truth, perfkit's
figure, the first verdict perfkit names today (kind and share), and its seconds. A scenario that
fails says so in its row and the others still run; a scenario past the time budget is skipped.
Last, ``pytest tests/gpu -m gpu`` runs in a subprocess (its summary is the last row, its output
in ``gpu_tests.txt``). The table is printed and written as markdown to ``--out``, else
``$GPU_CHECK_OUT``, else ``$OUT/gpu_check.md`` where ``$OUT`` is set; the raw numbers beside it
as JSON (``gpu_check.json``). Exit status: 0 when every row ran, 1 when one failed.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # gpu_scenarios, beside this file

import torch
from gpu_scenarios import (
    Ctx,
    Result,
    data_bound,
    launch_bound,
    matmul_mfu,
    step_parts_gpu,
    sync_stall,
    unpinned_copy,
)

import perfkit
import perfkit.torch

BUDGET_S = 200.0
"""Scenarios stop starting past this (the check must end within 4 minutes on an H100/H200)."""


def nvml_vs_torch(ctx: Ctx) -> Result:
    """NVML's memory and utilisation against torch.cuda's and the check's own events."""
    from perfkit.resources import NvmlSource, SourceUnavailable

    if not ctx.cuda:
        return Result("skipped: no CUDA", "skipped: no CUDA")
    source = NvmlSource()
    warn: Any = lambda key, message: print(message, file=sys.stderr) or True  # noqa: E731  # what a WarnOnce does
    try:
        source.open()
    except SourceUnavailable as exc:
        return Result("n/a", f"NVML unavailable: {exc}")
    try:
        index = torch.cuda.current_device()
        block = torch.empty(2 * 2**30, dtype=torch.uint8, device=ctx.device)
        torch.cuda.synchronize()
        mem = source.sample(warn)
        reserved = torch.cuda.memory_reserved() / 2**20
        a = torch.randn(ctx.big, ctx.big, device=ctx.device, dtype=ctx.dtype)
        s, e = ctx.event(), ctx.event()
        utils: list[float] = []
        torch_utils: list[float] = []
        t0 = time.perf_counter()
        s.record()
        while time.perf_counter() - t0 < 2.0:
            for _ in range(20):
                a @ a
            torch.cuda.synchronize()
            utils.append(source.sample(warn).get(f"gpu{index}.util_percent", float("nan")))
            with contextlib.suppress(Exception):  # torch.cuda.utilization needs pynvml or amdsmi
                torch_utils.append(float(torch.cuda.utilization()))
        e.record()
        e.synchronize()
        busy = s.elapsed_time(e) / 1e3 / (time.perf_counter() - t0)
        del block
        process = mem.get(f"gpu{index}.process_memory_mb")
        nv = statistics.mean(utils[len(utils) // 2 :]) if utils else float("nan")
        tu = statistics.mean(torch_utils[len(torch_utils) // 2 :]) if torch_utils else float("nan")
        return Result(
            f"torch reserved {reserved:.0f} MiB; events busy {busy:.0%}",
            f"NVML process {process if process is None else round(process)} MiB, used "
            f"{mem.get(f'gpu{index}.memory_used_mb', float('nan')):.0f} MiB; NVML util {nv:.0f}%, "
            f"torch.cuda.utilization {tu:.0f}%",
            "",
            {
                "reserved_mib": reserved,
                "nvml": mem,
                "nvml_util": utils,
                "torch_util": torch_utils,
                "busy": busy,
            },
        )
    finally:
        source.close()


def event_cost(ctx: Ctx) -> Result:
    """The host's cost per step of recording CUDA events per part (3 parts) against plain sections
    and against nothing; GPU time resolved at the snapshot, never in the loop."""
    x = torch.zeros(256, device=ctx.device)
    steps = 2000

    def loop(make: Callable[[str], Any] | None) -> float:
        t0 = time.perf_counter_ns()
        for _ in range(steps):
            for part in ("forward", "backward", "optimizer"):
                if make is None:
                    x.add_(1)
                else:
                    with make(part):
                        x.add_(1)
        ctx.sync()
        return (time.perf_counter_ns() - t0) / steps / 1e3

    reg = ctx.registry()
    rows: dict[str, list[float]] = {"none": [], "sections": [], "cuda sections": []}
    for _ in range(3):  # interleaved rounds, best of each
        rows["none"].append(loop(None))
        rows["sections"].append(loop(lambda p: perfkit.section(p, registry=reg)))
        rows["cuda sections"].append(loop(lambda p: perfkit.section(p, registry=reg, cuda=True)))
    t0 = time.perf_counter()
    snap = reg.snapshot()
    resolve_ms = 1e3 * (time.perf_counter() - t0)
    best = {k: min(v) for k, v in rows.items()}
    spans = snap["forward.gpu"].count if "forward.gpu" in snap else 0
    return Result(
        f"bare step {best['none']:.1f} µs (3 tiny kernels)",
        f"+{best['sections'] - best['none']:.1f} µs sections, +{best['cuda sections'] - best['none']:.1f} µs "
        f"with events (6/step); snapshot resolved {spans} forward spans in {resolve_ms:.0f} ms",
        "",
        {"us_per_step": best, "resolve_ms": resolve_ms},
    )


def watch_cost(ctx: Ctx) -> Result:
    """``.item()`` of a tiny device tensor with the sync watch on against off: the per-sync cost."""
    from perfkit.resources import stall_sites

    t = torch.ones(1, device=ctx.device)
    n = 2000

    def loop() -> float:
        t0 = time.perf_counter_ns()
        for _ in range(n):
            t.item()
        return (time.perf_counter_ns() - t0) / n / 1e3

    loop()
    off = min(loop() for _ in range(3))
    reg = ctx.registry()
    with perfkit.torch.SyncWatch(reg) as watch:
        on = min(loop() for _ in range(3))
    sites = stall_sites(reg.snapshot())
    seen = sum(s.count for s in sites if s.timed)
    state = "on" if watch.active or sites else f"off ({watch.reason})"
    where = sites[0].site if sites else "-"
    return Result(
        f"item() {off:.1f} µs",
        f"watched {on:.1f} µs (+{on - off:.1f}); {seen} of {3 * n} timed at {where}; watch {state}",
        "",
        {"off_us": off, "on_us": on, "timed": seen, "sites": [(s.site, s.count, s.timed) for s in sites]},
    )


def gpu_tests(ctx: Ctx, out_dir: Path | None) -> Result:
    """``pytest tests/gpu -m gpu`` in a subprocess, bounded; its summary line."""
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/gpu", "-m", "gpu"]
    env = {**os.environ, "PYTHONPATH": "." + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=180, env=env, check=False)
    text = proc.stdout + proc.stderr
    if out_dir is not None:
        (out_dir / "gpu_tests.txt").write_text(text, encoding="utf-8")
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    summary = lines[-1] if lines else f"exit {proc.returncode}"
    failed = [ln for ln in lines if ln.startswith(("FAILED", "ERROR"))]
    return Result(
        f"exit {proc.returncode}", summary + ("; " + "; ".join(failed[:3]) if failed else ""), "", {}
    )


EXPECT = {
    "data-bound loop (slow CPU loader)": "INPUT_BOUND / GPU_IDLE (data)",
    "per-step .item() sync stall": "SYNC_STALL at the saving; the compute beside it",
    "large unpinned batch copy": "H2D_COPY",
    "launch-bound loop (300 tiny kernels)": "HOST_BOUND",
    "matmul MFU, bf16": "COMPUTE_BOUND (MFU)",
    "matmul MFU, fp32 (TF32 off)": "COMPUTE_BOUND (MFU)",
    "step parts' GPU time (events) vs each part alone": "COMPUTE_BOUND (its parts)",
}
"""The verdict each planted scenario should be named first by, once the lead has wired them."""


def scenarios(ctx: Ctx, out_dir: Path | None) -> dict[str, Callable[[], Result]]:
    rows: dict[str, Callable[[], Result]] = {
        "data-bound loop (slow CPU loader)": lambda: data_bound(ctx),
        "per-step .item() sync stall": lambda: sync_stall(ctx),
        "large unpinned batch copy": lambda: unpinned_copy(ctx),
        "launch-bound loop (300 tiny kernels)": lambda: launch_bound(ctx),
    }
    if ctx.cuda:
        rows["matmul MFU, bf16"] = lambda: matmul_mfu(ctx, torch.bfloat16, "highest")
    rows["matmul MFU, fp32 (TF32 off)"] = lambda: matmul_mfu(ctx, torch.float32, "highest")
    rows["step parts' GPU time (events) vs each part alone"] = lambda: step_parts_gpu(ctx)
    rows["NVML vs torch.cuda: memory, utilisation"] = lambda: nvml_vs_torch(ctx)
    rows["CUDA events per part: cost per step"] = lambda: event_cost(ctx)
    rows["sync watch: cost per .item()"] = lambda: watch_cost(ctx)
    if ctx.cuda:
        rows["tests/gpu (pytest -m gpu)"] = lambda: gpu_tests(ctx, out_dir)
    return rows


def run(rows: dict[str, Callable[[], Result]], only: list[str]) -> list[tuple[str, Result | str, float]]:
    done: list[tuple[str, Result | str, float]] = []
    start = time.perf_counter()
    for name, fn in rows.items():
        if only and not any(o.lower() in name.lower() for o in only):
            continue
        if time.perf_counter() - start > BUDGET_S:
            done.append((name, "skipped: past the check's time budget", 0.0))
            continue
        t0 = time.perf_counter()
        try:
            result: Result | str = fn()
        except Exception as exc:  # each row reports its own failure; the rest still run
            traceback.print_exc()
            result = f"FAILED: {type(exc).__name__}: {exc}".replace("\n", " ")[:300]
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
        done.append((name, result, time.perf_counter() - t0))
        print(f"[gpu-check] {name}: {time.perf_counter() - t0:.1f} s", file=sys.stderr, flush=True)
    return done


def table(header: list[str], done: list[tuple[str, Result | str, float]]) -> str:
    def cell(text: str) -> str:
        return text.replace("|", "\\|").replace("\n", " ")

    lines = [
        *header,
        "",
        "| scenario | truth (the check's clock and events) | perfkit | first verdict (expected) | s |",
    ]
    lines.append("|---|---|---|---|---|")
    for name, r, secs in done:
        expect = f" ({EXPECT[name]})" if name in EXPECT else ""
        if isinstance(r, str):
            lines.append(f"| {cell(name)} | {cell(r)} | | {cell(expect)} | {secs:.1f} |")
        else:
            verdict = cell(r.verdict + expect)
            lines.append(f"| {cell(name)} | {cell(r.truth)} | {cell(r.perfkit)} | {verdict} | {secs:.1f} |")
    return "\n".join(lines) + "\n"


def context(device: str, peak_tflops: float | None) -> Ctx:
    if device == "cuda":
        if not torch.cuda.is_available():
            raise SystemExit("gpu_check: torch sees no CUDA device (use --device cpu to try the harness)")
        name = torch.cuda.get_device_name(0)
        return Ctx("cuda", True, name, 4096, torch.bfloat16, peak_tflops)
    if peak_tflops is None:  # no table entry for a CPU: state the best this one does, as a user would
        a = torch.randn(256, 256)
        best = float("inf")
        for _ in range(20):
            t0 = time.perf_counter()
            a @ a
            best = min(best, time.perf_counter() - t0)
        peak_tflops = 2 * 256**3 / best / 1e12
    return Ctx("cpu", False, None, 256, torch.float32, peak_tflops)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    parser.add_argument("--out", help="markdown file (default $GPU_CHECK_OUT, else $OUT/gpu_check.md)")
    parser.add_argument("--only", nargs="*", default=[], help="run the rows whose name contains one of these")
    parser.add_argument(
        "--peak-tflops", type=float, default=None, help="state the peak instead of the table's"
    )
    args = parser.parse_args(argv)
    out = (
        args.out
        or os.environ.get("GPU_CHECK_OUT")
        or (str(Path(os.environ["OUT"]) / "gpu_check.md") if os.environ.get("OUT") else None)
    )
    out_dir = Path(out).parent if out else None
    ctx = context(args.device, args.peak_tflops)
    header = [
        "# perfkit GPU check",
        "",
        f"- device: {ctx.name or 'CPU (harness only: events stamped by the host clock)'}"
        + (f", capability {torch.cuda.get_device_capability(0)}" if ctx.cuda else ""),
        f"- torch {torch.__version__} (CUDA {torch.version.cuda}), Python {platform.python_version()}, "
        f"perfkit {perfkit.__version__} ({perfkit.hot_path()})",
        f"- date: {datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}",
    ]
    if ctx.peak_tflops is not None:
        header.append(f"- peak stated: {ctx.peak_tflops:.3g} TFLOP/s")
    done = run(scenarios(ctx, out_dir), args.only)
    text = table(header, done)
    print(text)
    if out:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        Path(out).write_text(text, encoding="utf-8")
        raw = {n: (r.raw if isinstance(r, Result) else r) for n, r, _ in done}
        Path(out).with_suffix(".json").write_text(json.dumps(raw, indent=1, default=str), encoding="utf-8")
        print(f"written: {out}", file=sys.stderr)
    return 1 if any(isinstance(r, str) and r.startswith("FAILED") for _, r, _ in done) else 0


if __name__ == "__main__":
    sys.exit(main())
