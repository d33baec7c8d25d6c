"""The planted scenarios of the GPU check (benchmarks/gpu_check.py): each a cause with a known truth.

Each scenario runs a loop through ``perfkit.window`` (a stage epoch: the account, the verdicts), measures
its own truth with the check's clock and CUDA events (never perfkit's), and returns a ``Result``:
the truth, perfkit's figure beside it, the first verdict perfkit names, and the raw numbers.
On ``--device cpu`` the same code runs with events stamped by the host clock (``HostEvent``), so
the harness is proven end to end without a GPU; the figures then mean nothing about a GPU.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import torch

import perfkit
import perfkit.torch
from perfkit.resources import copy_advice, copy_stats, device_peak, mixed_peak, stall_sites, step_mfu


@dataclass
class Result:
    truth: str
    perfkit: str
    verdict: str = ""
    raw: dict[str, Any] = field(default_factory=dict)


class HostEvent:
    """A CUDA event stand-in on CPU: stamped by the host clock, complete at once."""

    def __init__(self) -> None:
        self.t = 0.0

    def record(self) -> None:
        self.t = time.perf_counter()

    def query(self) -> bool:
        return True

    def synchronize(self) -> None:
        pass

    def elapsed_time(self, end: HostEvent) -> float:
        return (end.t - self.t) * 1e3


@dataclass
class Ctx:
    """What every scenario needs: the device, its events, a full synchronize, sizes for the device."""

    device: str
    cuda: bool
    name: str | None
    big: int  # a matmul side that keeps the GPU busy ~1 ms in bf16 (CPU: a few ms in fp32)
    dtype: torch.dtype
    peak_tflops: float | None = None  # stated (CPU); None: the table's

    def event(self) -> Any:
        return torch.cuda.Event(enable_timing=True) if self.cuda else HostEvent()

    def sync(self) -> None:
        if self.cuda:
            torch.cuda.synchronize()

    def registry(self) -> perfkit.Registry:
        return perfkit.Registry() if self.cuda else perfkit.Registry(gpu_events=HostEvent)


def elapsed_s(start: Any, end: Any) -> float:
    end.synchronize()
    return float(start.elapsed_time(end)) / 1e3


def first_verdict(window: Any) -> tuple[str, dict[str, Any]]:
    """The verdicts perfkit names for one stage window, first and the next two with their shares (a
    cause that is not the largest, a sync stall beside the compute it stalls, is judged by its share)."""
    from perfkit.findings import diagnose_windows

    diagnosis = diagnose_windows([window])
    ranked = list(diagnosis.verdicts) or list(diagnosis.context)
    if not ranked:
        return "none", {}
    v = ranked[0]
    floor = "" if diagnosis.verdicts else " (below the floor)"
    then = ", ".join(f"{x.kind} {x.share:.0%}" for x in ranked[1:3])
    return f"{v.kind} {v.share:.0%}{floor}" + (f"; then {then}" if then else ""), {
        "kind": v.kind,
        "share": v.share,
        "all": [x.kind for x in ranked],
        "shares": {x.kind: x.share for x in ranked},
    }


def run_window(ctx: Ctx, reg: perfkit.Registry, items: Iterable[Any], step: Callable[[Any], None]) -> Any:
    """One training stage epoch of ``step`` over ``items``; the last step waits for the device so
    the window holds the device's work. ``LOOP_S[0]`` is the loop's own wall time, from the first
    request for an item to the end of the last step: the truth's denominator (the window's set-up
    and close are not the loop's)."""
    items = list(items) if not isinstance(items, Loader) else items
    # NVML's utilisation, as a Lightning or Hugging Face run samples it (a script starts its own)
    sampler = perfkit.ResourceSampler(0.05, registry=reg, sources=["nvml"]) if ctx.cuda else None
    with (
        sampler or contextlib.nullcontext(),
        perfkit.window("train", epoch=0, registry=reg, console=False) as w,
    ):
        n = len(items)  # type: ignore[arg-type]
        t0 = time.perf_counter()
        for i, item in enumerate(w.iterate(items)):
            step(item)
            if i == n - 1:
                ctx.sync()
        LOOP_S[0] = time.perf_counter() - t0
    return w.window


LOOP_S = [0.0]


class Loader:
    """A slow CPU loader: each batch costs ``load_s`` of host time before it is handed out."""

    def __init__(self, batches: int, load_s: float, make: Callable[[], Any]) -> None:
        self.batches, self.load_s, self.make = batches, load_s, make
        self.waited_s = 0.0

    def __len__(self) -> int:
        return self.batches

    def __iter__(self) -> Any:
        for _ in range(self.batches):
            t0 = time.perf_counter()
            time.sleep(self.load_s)  # a slow transform: the host is busy, the GPU has nothing queued
            batch = self.make()
            self.waited_s += time.perf_counter() - t0
            yield batch


def matmuls(ctx: Ctx, a: torch.Tensor, n: int) -> torch.Tensor:
    out = a
    for _ in range(n):
        out = a @ a
    return out


def data_bound(ctx: Ctx) -> Result:
    a = torch.randn(ctx.big, ctx.big, device=ctx.device, dtype=ctx.dtype)
    matmuls(ctx, a, 2)
    ctx.sync()
    loader = Loader(150, 0.02, lambda: None)  # 3 s: NVML's samples must cover 2 s
    spans: list[tuple[Any, Any]] = []
    reg = ctx.registry()

    def step(_: Any) -> None:
        s, e = ctx.event(), ctx.event()
        s.record()
        matmuls(ctx, a, 2)
        e.record()
        spans.append((s, e))  # resolved after the loop: no wait inside it

    window = run_window(ctx, reg, loader, step)
    wall = LOOP_S[0]
    acc = window.account
    verdict, raw = first_verdict(window)
    truth_wait = loader.waited_s / wall
    busy = sum(elapsed_s(s, e) for s, e in spans) / wall
    ours = acc.parts.get("data_wait", 0.0) / acc.wall_s
    return Result(
        f"loader {truth_wait:.0%} of wall; GPU busy {busy:.0%}",
        f"data_wait {ours:.0%} of wall",
        verdict,
        {"truth_wait_share": truth_wait, "perfkit_wait_share": ours, "gpu_busy_share": busy, **raw},
    )


def sync_stall(ctx: Ctx) -> Result:
    """A step of G on the GPU, a loss read with ``.item()``, then H of the host's own work (the next
    batch, logging) with nothing queued. The truth of the advice: the same loop reading the loss
    once at the end, timed by the check's clock; what it saves is the stall's cost (min(G, H))."""
    a = torch.randn(ctx.big * 2, ctx.big * 2, device=ctx.device, dtype=ctx.dtype)
    matmuls(ctx, a, 2)
    ctx.sync()
    steps = 300 if ctx.cuda else 20
    blocked: list[float] = []

    def step(read: bool) -> Callable[[Any], None]:
        losses: list[torch.Tensor] = []

        def one(_: Any) -> None:
            loss = matmuls(ctx, a, 4).float().mean()  # G: ~6 ms of bf16 matmuls on an H200
            if read:
                t0 = time.perf_counter()
                loss.item()  # the planted per-step sync
                blocked.append(time.perf_counter() - t0)
            else:
                losses.append(loss.detach())  # the advice: kept on the device, read at the end
            time.sleep(0.003)  # H: host work after the sync (logging, the next batch)

        return one

    reg = ctx.registry()
    with perfkit.torch.SyncWatch(reg) as watch:
        window = run_window(ctx, reg, range(steps), step(True))
    wall = LOOP_S[0]
    run_window(ctx, ctx.registry(), range(steps), step(False))
    advised = LOOP_S[0]
    sites = stall_sites(window.snapshot)
    verdict, raw = first_verdict(window)
    mean_ms = 1e3 * sum(blocked) / len(blocked)
    saved = (wall - advised) / wall
    truth = (
        f"item() blocks {mean_ms:.2f} ms/step ({sum(blocked) / wall:.0%}): the GPU idles the other "
        f"{1 - sum(blocked) / wall:.0%}; reading the loss once at the end saves {saved:.0%} of the loop"
    )
    if not watch.active and not sites:
        ours = f"watch off: {watch.reason}"
    elif sites:
        top = sites[0]
        ours = f"{top.site}: {top.count}x, {1e3 * top.mean_s:.2f} ms each ({top.total_s / window.wall_s:.0%})"
    else:
        ours = "no stall recorded"
    raw.update(
        truth_blocked_s=sum(blocked),
        truth_saved_share=saved,
        wall_s=wall,
        advised_wall_s=advised,
        sites=[(s.site, s.count, s.total_s, s.timed) for s in sites],
    )
    return Result(truth, ours, verdict, raw)


def unpinned_copy(ctx: Ctx) -> Result:
    nbytes = 64 * 2**20 if ctx.cuda else 8 * 2**20
    host = torch.randn(nbytes // 4)
    w = torch.randn(256, 256, device=ctx.device)
    reg = ctx.registry()
    host_s: list[float] = []

    def move(batch: torch.Tensor, non_blocking: bool) -> torch.Tensor:
        return batch.to(ctx.device, non_blocking=non_blocking) if ctx.cuda else batch.clone()

    step_s: list[float] = []

    def step(batch: torch.Tensor) -> None:
        t0 = time.perf_counter()
        with perfkit.torch.time_copy(batch, registry=reg):
            x = move(batch, False)
        host_s.append(time.perf_counter() - t0)
        (x[: 256 * 256].view(256, 256) @ w).sum()
        step_s.append(time.perf_counter() - t0)

    window = run_window(ctx, reg, [host] * 20, step)
    loop_wall = LOOP_S[0]
    found = copy_stats(window.snapshot)
    pinned_host = pinned_stream = None
    if ctx.cuda:  # the truth of the advice: the same copy, pinned and non-blocking
        pinned = host.pin_memory()
        s, e = ctx.event(), ctx.event()
        hs: list[float] = []
        for _ in range(5):
            ctx.sync()
            s.record()
            t0 = time.perf_counter()
            move(pinned, True)
            hs.append(time.perf_counter() - t0)
            e.record()
            pinned_stream = elapsed_s(s, e)
        pinned_host = min(hs)
    bandwidth = perfkit.torch.pinned_bandwidth()
    advice = copy_advice(found, pinned_gb_per_s=bandwidth) if found else None
    verdict, raw = first_verdict(window)
    per = 1e3 * sum(host_s) / len(host_s)
    truth = f"pageable {nbytes / 1e6:.0f} MB: host {per:.2f} ms/copy"
    if pinned_host is not None and pinned_stream is not None:
        truth += (
            f"; pinned+non_blocking: host {1e3 * pinned_host:.3f} ms, stream {1e3 * pinned_stream:.2f} ms"
        )
    ours = "no copy recorded"
    if found:
        ours = f"host {1e3 * found.host_s / found.count:.2f} ms/copy, {found.pinned_fraction:.0%} pinned"
        if found.gpu_s is not None:
            ours += f", stream {1e3 * found.gpu_s / found.count:.2f} ms"
        if advice:
            lo, hi = (1e3 * g / found.count for g in advice.gain_s)
            ours += f"; advice {advice.change} gain {lo:.2f}-{hi:.2f} ms/copy"
    loop_s = loop_wall
    truth += f" ({sum(host_s) / loop_s:.0%} of the loop; steps {sum(step_s) / loop_s:.0%})"
    raw.update(
        truth_host_s=host_s,
        truth_step_s=step_s,
        loop_s=loop_s,
        window_wall_s=window.wall_s,
        pinned_host_s=pinned_host,
        pinned_stream_s=pinned_stream,
        bandwidth=bandwidth,
    )
    return Result(truth, ours, verdict, raw)


def launch_bound(ctx: Ctx) -> Result:
    x = torch.zeros(1024, device=ctx.device)
    big = torch.randn(ctx.big * 2, ctx.big * 2, device=ctx.device, dtype=ctx.dtype)
    ops = 300

    def tiny(t: torch.Tensor) -> torch.Tensor:
        for _ in range(ops):
            t = t + 1
        return t

    tiny(x)
    ctx.sync()
    # truth: the kernels' own time, queued behind a long matmul so they run back to back
    matmuls(ctx, big, 3)
    s, e = ctx.event(), ctx.event()
    s.record()
    tiny(x)
    e.record()
    kernels_s = elapsed_s(s, e)
    reg = ctx.registry()
    host: list[float] = []

    def step(_: Any) -> None:
        t0 = time.perf_counter()
        with perfkit.section("tiny", registry=reg, cuda=True):
            tiny(x)
        host.append(time.perf_counter() - t0)

    window = run_window(ctx, reg, range(800), step)  # ~2.7 s: NVML's samples must cover 2 s
    snap = window.snapshot
    gpu_mean = snap["tiny.gpu"].mean_s if "tiny.gpu" in snap else float("nan")
    verdict, raw = first_verdict(window)
    host_mean = sum(host) / len(host)
    raw.update(kernels_s=kernels_s, host_mean_s=host_mean, event_span_mean_s=gpu_mean)
    return Result(
        f"{ops} kernels: GPU {1e3 * kernels_s:.2f} ms back to back; host {1e3 * host_mean:.2f} ms/step "
        f"(GPU busy {kernels_s / host_mean:.0%})",
        f"step {1e3 * snap['tiny'].mean_s:.2f} ms host, {1e3 * gpu_mean:.2f} ms event span",
        verdict,
        raw,
    )


def matmul_mfu(ctx: Ctx, dtype: torch.dtype, precision: str) -> Result:
    previous = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision(precision)
    try:
        n = ctx.big * (2 if ctx.cuda and dtype != torch.float32 else 1)
        a = torch.randn(n, n, device=ctx.device, dtype=dtype)
        per_step = 8 if dtype != torch.float32 else 2
        steps = 30 if ctx.cuda else 8
        matmuls(ctx, a, 2)
        ctx.sync()
        with perfkit.torch.count_flops() as counted:
            matmuls(ctx, a, per_step)
        analytic = 2 * n**3 * per_step
        peak = mixed_peak(counted.by_dtype, ctx.name, peak_tflops=ctx.peak_tflops)
        truth_peak = ctx.peak_tflops or device_peak(ctx.name, dtype).tflops
        reg = ctx.registry()
        spans: list[tuple[Any, Any]] = []

        def step(_: Any) -> None:
            s, e = ctx.event(), ctx.event()
            s.record()
            matmuls(ctx, a, per_step)
            e.record()
            spans.append((s, e))

        ctx.sync()
        window = run_window(ctx, reg, range(steps), step)
        gpu_s = sum(elapsed_s(s, e) for s, e in spans)  # the matmuls' own time on the stream
        truth = analytic * steps / gpu_s / 1e12
        ours = step_mfu(window.snapshot, "train", counted.total, peak)
        verdict, raw = first_verdict(window)
        truth_txt = f"{truth:.3g} TFLOP/s"
        if truth_peak:
            truth_txt += f" = {truth / truth_peak:.0%} of {truth_peak:g}"
        raw.update(analytic=analytic, counted=counted.total, by_dtype=counted.by_dtype, truth_tflops=truth)
        raw.update(mfu=ours.fraction, peak=peak.tflops, peak_dtype=peak.dtype)
        return Result(
            truth_txt, f"{ours.line}; counted {counted.total / analytic:.3f}x analytic", verdict, raw
        )
    finally:
        torch.set_float32_matmul_precision(previous)


def step_parts_gpu(ctx: Ctx) -> Result:
    """Each step part's GPU time (``perfkit.stages.DeviceParts``: events where the host moves from
    part to part, the loop pipelined) against the check's own: each part run alone between two
    synchronizes, timed by a pair of events. A GPU-bound MLP (backward about twice forward) with
    AdamW; and the host's cost per step of the parts' events, the recorder with them against
    without (both with the step's parts timed on the host)."""
    from perfkit.stages import DeviceParts, StageRecorder

    n = ctx.big
    torch.manual_seed(0)
    model = torch.nn.Sequential(*[torch.nn.Linear(n, n) for _ in range(4)]).to(ctx.device, ctx.dtype)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randn(2 * n, n, device=ctx.device, dtype=ctx.dtype)
    steps = 200 if ctx.cuda else 10
    held: dict[str, Any] = {}

    def forward() -> None:
        held["loss"] = model(x).float().pow(2).mean()

    def backward() -> None:
        held["loss"].backward()

    def optimizer() -> None:
        opt.step()
        opt.zero_grad(set_to_none=True)

    parts = {"forward": forward, "backward": backward, "optimizer": optimizer}
    for _ in range(3):  # warm up (kernels chosen, the optimizer's state made)
        for fn in parts.values():
            fn()
    ctx.sync()
    alone: dict[str, float] = dict.fromkeys(parts, 0.0)
    for _ in range(steps):
        for name, fn in parts.items():
            start, end = ctx.event(), ctx.event()
            ctx.sync()
            start.record()
            fn()
            end.record()
            alone[name] += elapsed_s(start, end)
    reg = ctx.registry()

    def step(_: Any) -> None:
        for fn in parts.values():
            fn()

    window = run_window(ctx, reg, range(steps), step)
    gpu = window.account.subjects.get("step_gpu", {})
    rows = [f"{p} {1e3 * alone[p] / steps:.2f}" for p in parts]
    ours = [f"{p} {1e3 * gpu.get(p, 0.0) / steps:.2f}" for p in parts]

    def cost(device: bool) -> float:
        rreg = ctx.registry()
        rec = StageRecorder(rreg, top_k_slowest=0, device=DeviceParts(rreg, ctx.event) if device else None)
        stop = perfkit.torch.time_step_parts(rec)
        y = torch.zeros(8, device=ctx.device, requires_grad=True)
        tiny = torch.optim.SGD([y], lr=0.1)
        rec.begin("train", 0)
        t0 = time.perf_counter_ns()
        for _ in range(500):
            rec.step_begin("train")
            tiny.zero_grad()
            (y * 2).sum().backward()  # type: ignore[no-untyped-call]
            tiny.step()
            rec.step_end("train")
        ctx.sync()
        spent = (time.perf_counter_ns() - t0) / 500 / 1e3
        rec.end("train")
        stop()
        return spent

    off = min(cost(False) for _ in range(3))
    on = min(cost(True) for _ in range(3))
    verdict, raw = first_verdict(window)
    raw.update(alone_s=alone, gpu_s=gpu, steps=steps, cost_off_us=off, cost_on_us=on)
    return Result(
        "ms/step alone: " + ", ".join(rows),
        "ms/step, events: "
        + ", ".join(ours)
        + f"; events cost +{on - off:.1f} µs a step ({off:.1f} -> {on:.1f})",
        verdict,
        raw,
    )
