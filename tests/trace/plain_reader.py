"""An independent, deliberately plain reader of Kineto traces: what the real-trace tests compare perfkit with.

It shares no code with ``perfkit.trace``: the whole file goes through ``json.load``, and every number is a
sorted-interval union or a per-thread walk written out here in a few lines, so a bug in perfkit's streaming,
columns or phase attribution cannot hide in both.

    facts = read_facts(Path("../shared/traces/hta_ns_resolution/rank-0....json.gz"))
    facts.device_busy / facts.step_us           # all device activity over the step windows
"""

from __future__ import annotations

import gzip
import json
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

Interval = tuple[float, float]

DEVICE_CATEGORIES = {"kernel", "gpu_memcpy", "gpu_memset", "memcpy", "memset", "mtia_ccp_events"}
DEVICE_CATEGORIES |= {"cuda_profiler_range"}
CPU_CATEGORIES = {"cpu_op", "operator", "user_annotation"}


@dataclass
class Facts:
    """What the tests check, each computed from the raw events (µs)."""

    steps: int = 0
    step_us: float = 0.0
    windows: list[Interval] = field(default_factory=list)
    device_busy: float = 0.0  # union of all device activity inside the windows
    marked: dict[str, float] = field(default_factory=dict)  # "## name ##" -> its cover inside the windows
    autograd_threads: int = 0
    autograd_cover: float = 0.0  # union of the autograd engine threads' ranges inside the windows
    phase_cover: float = 0.0  # union of every phase mark and the autograd threads' ranges
    memory_events: int = 0
    device_events: int = 0


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
    total = 0.0
    for a, b in union(intervals):
        for lo, hi in windows:
            total += max(0.0, min(b, hi) - max(a, lo))
    return total


def is_backward_op(name: str) -> bool:
    return name.startswith("autograd::engine::evaluate_function") or name.rstrip("0123456789").endswith(
        "Backward"
    )


def read_facts(path: Path) -> Facts:
    events, _ = load_events(path)
    ranges: dict[tuple[str, str], list[tuple[str, float, float]]] = defaultdict(list)
    device: list[Interval] = []
    facts = Facts()
    for e in events:
        cat = str(e.get("cat", "")).lower()
        if e.get("name") == "[memory]":
            facts.memory_events += 1
        if e.get("ph") != "X":
            continue
        start, end = float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0))
        if cat in DEVICE_CATEGORIES:
            device.append((start, end))
        elif cat in CPU_CATEGORIES:
            ranges[(str(e.get("pid")), str(e.get("tid")))].append((e["name"], start, end))
    facts.device_events = len(device)
    steps = {t: [(a, b) for n, a, b in rs if n.startswith("ProfilerStep#")] for t, rs in ranges.items()}
    if any(steps.values()):
        main = max(steps, key=lambda t: len(steps[t]))
        facts.windows = union(steps[main])
        facts.steps = len(steps[main])
    elif ranges:
        main = max(ranges, key=lambda t: max(b for _, _, b in ranges[t]) - min(a for _, a, _ in ranges[t]))
        spans = [(a, b) for _, a, b in ranges[main]] + device
        facts.windows = [(min(a for a, _ in spans), max(b for _, b in spans))]
    else:
        return facts
    facts.step_us = sum(b - a for a, b in facts.windows)
    facts.device_busy = covered(device, facts.windows)
    autograd = [t for t, rs in ranges.items() if t != main and any(is_backward_op(n) for n, _, _ in rs)]
    facts.autograd_threads = len(autograd)
    threads_cover = [(a, b) for t in autograd for _, a, b in ranges[t]]
    facts.autograd_cover = covered(threads_cover, facts.windows)
    marks: dict[str, list[Interval]] = defaultdict(list)
    for name, a, b in ranges[main]:
        if name.startswith("## ") and name.endswith(" ##"):
            marks[name].append((a, b))
    facts.marked = {n: covered(iv, facts.windows) for n, iv in marks.items()}
    phase_marks = [(a, b) for n, a, b in ranges[main] if is_phase_mark(n)]
    facts.phase_cover = covered(phase_marks + threads_cover, facts.windows)
    return facts


_PHASE_WORDS = ("forward", "backward", "optimizer", "zero_grad", "data_load", "load_batch", "next_batch")
_PHASE_WORDS += ("wait_for_batch", "wait_for_training_batch", "copy_batch_to_gpu")
_TORCH_PHASES = ("Optimizer.step#", "Optimizer.zero_grad#", "enumerate(DataLoader)#", "DistributedDataParallel.forward")


def is_phase_mark(name: str) -> bool:
    """The marks the issue names: ``## forward ##``-style words, torch's own ranges, backward ops."""
    if name.startswith(_TORCH_PHASES) or is_backward_op(name):
        return True
    if name.startswith("##"):
        words = name.strip("# ").split(":")[0].split(" ")
        return any(w in _PHASE_WORDS for w in words)
    return False
