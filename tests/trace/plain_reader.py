"""An independent, deliberately plain reader of Kineto traces: what the real-trace tests compare perfkit with.

It shares no code with ``perfkit.trace``: the whole file goes through ``json.load`` and every number
is a sorted-interval union, a per-thread stack walk or a loop over gaps, written out here in a few
lines from the rules that ``docs/trace-analysis.md`` states, so a bug in perfkit's streaming,
columns or part attribution cannot hide in both.

    facts = read_facts(Path("../shared/traces/hta_ns_resolution/rank-0....json.gz"))
    facts.device_busy / facts.step_us           # all device activity over the step windows
"""

from __future__ import annotations

import gzip
import json
import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

Interval = tuple[float, float]
Thread = tuple[str, str]

DEVICE = {"kernel", "gpu_memcpy", "gpu_memset", "memcpy", "memset", "mtia_ccp_events", "cuda_profiler_range"}
LAUNCH = {"cuda_runtime", "runtime", "cuda_driver", "mtia_runtime"}
OPS = {"cpu_op", "operator"}
CPU = OPS | {"user_annotation"}
TORCH_MARKS = (
    "enumerate(DataLoader)#",
    "Optimizer.step#",
    "Optimizer.zero_grad#",
    "DistributedDataParallel.forward",
)
PERFKIT_MARKS = {f"perfkit.part.{p}" for p in ("data_wait", "forward", "backward", "optimizer")}
PART_WORDS = {
    "data_load",
    "data_loading",
    "dataloader",
    "load_batch",
    "next_batch",
    "get_batch",
    "fetch_batch",
}
PART_WORDS |= {
    "wait_for_batch",
    "wait_for_training_batch",
    "copy_batch_to_gpu",
    "optimizer",
    "optimizer_step",
}
PART_WORDS |= {"optim", "zero_grad", "backward", "forward"}


@dataclass
class Facts:
    """What the tests check, each computed from the raw events (µs)."""

    steps: int = 0
    step_us: float = 0.0
    windows: list[Interval] = field(default_factory=list)
    device_busy: float = 0.0  # union of all device activity inside the windows
    kernel_busy: float = 0.0
    forward_mark: float | None = None  # cover of "## forward ##" inside the windows, None when absent
    backward_mark: float | None = None
    autograd_threads: int = 0
    autograd_cover: float = 0.0  # union of the autograd engine threads' ranges inside the windows
    part_cover: float = 0.0  # union of every part mark and the autograd threads' ranges
    memory: dict[str, float] = field(default_factory=dict)  # device -> peak bytes
    top_op: tuple[str, float] = ("", 0.0)  # the op with most self time over the whole trace
    idle: dict[str, float] = field(default_factory=dict)  # host_wait/kernel_wait/other of the device
    comm: tuple[float, float, float] | None = None  # comm, compute, overlap inside the windows
    rank: int | None = None


def load_events(path: Path) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    with gzip.open(path, "rt") as fh:
        data = json.load(fh)
    if isinstance(data, list):
        return data, {}
    return data["traceEvents"], data


def union(intervals: list[Interval]) -> list[Interval]:
    out: list[Interval] = []
    for a, b in sorted(intervals):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def covered(intervals: list[Interval], windows: list[Interval]) -> float:
    """Length of the union of ``intervals`` inside the (disjoint) ``windows``."""
    return sum(max(0.0, min(b, hi) - max(a, lo)) for a, b in union(intervals) for lo, hi in windows)


def is_backward_op(name: str) -> bool:
    return name.startswith("autograd::engine::") or bool(re.search(r"Backwards?\d*$", name))


def is_part_mark(name: str, cat: str) -> bool:
    """The documented rules: perfkit's marks, torch's ranges, backward ops, a user annotation's words."""
    if name in PERFKIT_MARKS or name.startswith(TORCH_MARKS):
        return True
    if cat == "user_annotation" or name.startswith("##"):
        return bool(set(re.findall(r"[a-z0-9_]+", name.lower())) & PART_WORDS)
    return cat in OPS and is_backward_op(name)


def read_facts(path: Path) -> Facts:
    events, top = load_events(path)
    facts = Facts()
    info = top.get("distributedInfo")
    facts.rank = info.get("rank") if isinstance(info, dict) else None
    cpu: dict[Thread, list[tuple[str, str, float, float, float]]] = defaultdict(list)
    device: list[tuple[str, str, float, float, Any]] = []  # cat, name, start, end, correlation
    launches: dict[Any, float] = {}
    memory: dict[str, list[tuple[float, dict[str, Any]]]] = defaultdict(list)
    for e in events:
        cat = str(e.get("cat", "")).lower()
        if e.get("name") == "[memory]":
            args = e["args"]
            kind = {0: "cpu", 1: "cuda"}[args["Device Type"]]
            key = kind if kind == "cpu" or args.get("Device Id", -1) < 0 else f"{kind}:{args['Device Id']}"
            memory[key].append((e["ts"], args))
        if e.get("ph") != "X":
            continue
        start, end = float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0))
        if cat in DEVICE:
            device.append((cat, e["name"], start, end, e.get("args", {}).get("correlation")))
        elif cat in CPU:
            cpu[(str(e.get("pid")), str(e.get("tid")))].append(
                (cat, e["name"], start, end, float(e.get("dur", 0)))
            )
        elif cat in LAUNCH and "correlation" in e.get("args", {}):
            launches[e["args"]["correlation"]] = start
    facts.memory = {d: _memory_peak(rows) for d, rows in memory.items()}
    facts.top_op = _top_op(cpu)
    main = _windows(facts, cpu, device)
    if main is None:
        return facts
    _device_facts(facts, device, launches)
    _part_facts(facts, cpu, main)
    return facts


def _memory_peak(rows: list[tuple[float, dict[str, Any]]]) -> float:
    totals = [a["Total Allocated"] for _, a in rows if "Total Allocated" in a]
    if totals:
        return float(max(totals))
    running, peak = 0.0, 0.0
    for _, args in sorted(rows, key=lambda r: r[0]):
        running += args["Bytes"]
        peak = max(peak, running)
    return peak


def _top_op(cpu: dict[Thread, list[tuple[str, str, float, float, float]]]) -> tuple[str, float]:
    """Self time per op name, thread by thread: a range's duration minus its direct children's.

    Of two ranges with the same bounds the one written first is the caller (torch writes
    ``aten::item`` before the ``aten::_local_scalar_dense`` it calls).
    """
    self_us: dict[str, float] = defaultdict(float)
    for ranges in cpu.values():
        # Durations as written: at 1.7e15 µs a float's step is 0.25 µs, so end - start would blur them.
        ops = [
            (a, -d, i, n)
            for i, (c, n, a, _, d) in enumerate(ranges)
            if c in OPS and not n.startswith("ProfilerStep#")
        ]
        stack: list[list[Any]] = []  # [end, name, duration, children]
        for a, neg, _, name in sorted(ops):
            while stack and a >= stack[-1][0]:
                _, n, d, kids = stack.pop()
                self_us[n] += max(0.0, d - kids)
            if stack:
                stack[-1][3] += -neg
            stack.append([a - neg, name, -neg, 0.0])
        for _, n, d, kids in stack:
            self_us[n] += max(0.0, d - kids)
    return max(self_us.items(), key=lambda kv: kv[1]) if self_us else ("", 0.0)


def _windows(facts: Facts, cpu: dict[Thread, list[Any]], device: list[Any]) -> Thread | None:
    steps = {t: [(a, b) for _, n, a, b, _ in rs if n.startswith("ProfilerStep#")] for t, rs in cpu.items()}
    if any(steps.values()):
        main = max(steps, key=lambda t: len(steps[t]))
        facts.windows, facts.steps = union(steps[main]), len(steps[main])
    elif cpu:
        main = max(cpu, key=lambda t: max(r[3] for r in cpu[t]) - min(r[2] for r in cpu[t]))
        spans = [(a, b) for _, _, a, b, _ in cpu[main]] + [(a, b) for _, _, a, b, _ in device]
        facts.windows = [(min(a for a, _ in spans), max(b for _, b in spans))]
    else:
        return None
    facts.step_us = sum(b - a for a, b in facts.windows)
    return main


def _device_facts(facts: Facts, device: list[Any], launches: dict[Any, float]) -> None:
    w = facts.windows
    if not device:
        return
    facts.device_busy = covered([(a, b) for _, _, a, b, _ in device], w)
    facts.kernel_busy = covered([(a, b) for c, n, a, b, _ in device if _is_kernel(c, n)], w)
    comm = [(a, b) for c, n, a, b, _ in device if _is_kernel(c, n) and _is_comm(n)]
    compute = [(a, b) for c, n, a, b, _ in device if _is_kernel(c, n) and not _is_comm(n)]
    if comm:
        both = covered(comm, w) + covered(compute, w) - covered(comm + compute, w)
        facts.comm = (covered(comm, w), covered(compute, w), both)
    facts.idle = {"host_wait": 0.0, "kernel_wait": 0.0, "other": 0.0}
    reach = None
    for _, _, a, b, corr in sorted(device, key=lambda d: d[2]):
        if reach is not None and a > reach:
            launch = launches.get(corr) if corr is not None and corr >= 0 else None
            kind = (
                "host_wait"
                if launch is not None and launch > reach
                else "kernel_wait"
                if a - reach < 30
                else "other"
            )
            facts.idle[kind] += covered([(reach, a)], w)
        reach = b if reach is None else max(reach, b)


def _is_kernel(cat: str, name: str) -> bool:
    return cat in ("kernel", "cuda_profiler_range") or (cat == "mtia_ccp_events" and name != "dma_request")


def _is_comm(name: str) -> bool:
    return "nccl" in name.lower() or "hccl" in name.lower()


def _part_facts(facts: Facts, cpu: dict[Thread, list[Any]], main: Thread) -> None:
    w = facts.windows
    autograd = [
        t for t, rs in cpu.items() if t != main and any(c in OPS and is_backward_op(n) for c, n, *_ in rs)
    ]
    facts.autograd_threads = len(autograd)
    busy = [
        (a, b)
        for t in autograd
        for _, n, a, b, _ in cpu[t]
        if not n.startswith(("ProfilerStep#", "perfkit.part."))
    ]
    facts.autograd_cover = covered(busy, w)
    marked = [(a, b) for c, n, a, b, _ in cpu[main] if is_part_mark(n, c)]
    facts.part_cover = covered(marked + busy, w)
    for name, attr in (("## forward ##", "forward_mark"), ("## backward ##", "backward_mark")):
        ranges = [(a, b) for _, n, a, b, _ in cpu[main] if n == name]
        setattr(facts, attr, covered(ranges, w) if ranges else None)
