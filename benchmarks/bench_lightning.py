"""What perfkit's Lightning callbacks cost per training step, on a tiny CPU model.

    python benchmarks/bench_lightning.py [--steps 400] [--rounds 5]

Each configuration trains the same tiny model for 3 epochs of ``--steps`` steps;
a timing callback, present in every configuration, reads the clock at the start
and end of each training epoch. Configurations are interleaved over ``--rounds``
rounds and the median per-step time is reported, with its difference from the
run without callbacks.

Part 1 (issue 5): an empty Callback, PerfMonitor with everything on (resource
sampler, instrumented loader, run directory, slowest steps), and Lightning's
ThroughputMonitor.
Part 2 (issue 6): a ProfilerCallback with one window on epoch 1, against no
callback and Lightning's ``profiler="pytorch"``; the steps of epochs 0 and 2,
outside the window, are compared.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from typing import Any

import lightning as L
import torch
from lightning.pytorch.callbacks import Callback, ThroughputMonitor
from perfkit_lightning import PerfMonitor, ProfilerCallback
from perfkit_lightning._hookclock import HookClock
from torch.utils.data import DataLoader, TensorDataset


class Tiny(L.LightningModule):
    def __init__(self, steps: int) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(32, 1)
        self.steps = steps

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        x, y = batch
        return torch.nn.functional.mse_loss(self.layer(x), y)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.01)

    def train_dataloader(self) -> DataLoader[Any]:
        n = self.steps * 8
        return DataLoader(TensorDataset(torch.randn(n, 32), torch.randn(n, 1)), batch_size=8)


class EpochClock(Callback):
    """Per-step time of each training epoch (present in every configuration)."""

    def __init__(self) -> None:
        self.per_step: list[float] = []
        self._t0 = 0.0

    def on_train_epoch_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._t0 = time.perf_counter()

    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.per_step.append((time.perf_counter() - self._t0) / trainer.num_training_batches)


def fit(steps: int, callbacks: list[Callback], **trainer_kwargs: Any) -> list[float]:
    clock = EpochClock()
    with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer = L.Trainer(
            max_epochs=3,
            accelerator="cpu",
            devices=1,
            logger=False,
            enable_checkpointing=False,
            enable_progress_bar=False,
            enable_model_summary=False,
            limit_val_batches=0,
            default_root_dir=tmp,
            callbacks=[clock, *callbacks],
            **trainer_kwargs,
        )
        trainer.fit(Tiny(steps))
    return clock.per_step


Config = Callable[[str], tuple[list[Callback], dict[str, Any]]]


def run(configs: dict[str, Config], steps: int, rounds: int, epochs: tuple[int, ...]) -> dict[str, float]:
    samples: dict[str, list[float]] = {name: [] for name in configs}
    for _ in range(rounds):
        for name, make in configs.items():
            with tempfile.TemporaryDirectory() as tmp:
                callbacks, kwargs = make(tmp)
                per_step = fit(steps, callbacks, **kwargs)
            samples[name] += [per_step[e] for e in epochs]
    return {name: statistics.median(v) for name, v in samples.items()}


def table(title: str, medians: dict[str, float], base: str) -> str:
    lines = [title, f"  {'configuration':<44}{'µs/step':>10}{'over ' + base:>22}"]
    for name, value in medians.items():
        delta = (value - medians[base]) * 1e6
        lines.append(f"  {name:<44}{value * 1e6:>10.1f}{delta:>+18.1f} µs ({value / medians[base]:.2f}x)")
    return "\n".join(lines)


def own_work_per_step(n: int = 20_000) -> dict[str, float]:
    """PerfMonitor's own work per step, timed directly (the fits above are noisy at the µs level).

    The stage recorder's work for one step (its start and end, the samples of a real tuple
    batch), what wrapping Lightning's profiler costs per hook Lightning runs (against the
    default profiler's own cost), the instrumented loader's extra work per batch (a
    DataLoader over a list without collation, so the loader itself costs little), and the
    sampler thread's CPU per second spread over the steps of that second.
    """
    from lightning.pytorch.profilers import PassThroughProfiler

    import perfkit
    import perfkit.torch
    from perfkit.stages import StageRecorder

    reg = perfkit.Registry()
    rec = StageRecorder(reg, top_k_slowest=5)
    rec.begin("train", 0)
    batch = (torch.zeros(8, 32), torch.zeros(8, 1))
    t0 = time.perf_counter()
    for _ in range(n):
        rec.step_begin("train")
        rec.step_end("train")
        rec.batch_done("train", batch)
    recorder = (time.perf_counter() - t0) / n
    rec.end("train")

    def per_action(profiler: Any) -> float:
        t = time.perf_counter()
        for _ in range(n):
            with profiler.profile("[Callback]ModelSummary.on_train_batch_end"):
                pass
        return (time.perf_counter() - t) / n

    default = PassThroughProfiler()
    clock = HookClock(default, rec, None, ours=lambda cb: False, eval_stage=lambda s: s)  # type: ignore[arg-type]
    clock._kinds["[Callback]ModelSummary.on_train_batch_end"] = None  # a hook nobody overrides
    action = min(per_action(clock) for _ in range(3)) - min(per_action(default) for _ in range(3))

    items = list(range(n))

    def per_batch(loader: DataLoader[Any]) -> float:
        t = time.perf_counter()
        for _ in loader:
            pass
        return (time.perf_counter() - t) / n

    plain = min(per_batch(DataLoader(items, batch_size=None)) for _ in range(3))
    instrumented = perfkit.torch.instrument(DataLoader(items, batch_size=None), "train", time_wait=True)
    loader = min(per_batch(instrumented) for _ in range(3)) - plain

    # the hooks HookClock times in a real fit's step, and what timing one costs inside a step
    with perfkit.use_registry(perfkit.Registry()) as fitted, tempfile.TemporaryDirectory() as tmp:
        fit(200, [PerfMonitor(run_dir=tmp, top_k_slowest=5, sample_resources=False)])
        snap = fitted.snapshot()
    hooks = sum(snap[s].count for s in snap if s.startswith("train.hook.")) / snap["train.step"].count
    rec.begin("train", 1)
    rec.step_begin("train")
    clock._kinds["[Callback]ModelSummary.on_train_batch_end"] = ("hook", "Timed")  # a timed hook
    span = min(per_action(clock) for _ in range(3)) - min(per_action(default) for _ in range(3))
    rec.end("train")

    sampler = perfkit.ResourceSampler(0.1, registry=reg).start()
    time.sleep(3)
    sampler.stop()
    return {
        "recorder": recorder,
        "action": action,
        "loader": loader,
        "sampler_cpu_share": sampler.cpu_time_s / 3,
        "hooks_per_step": hooks,
        "span": span,
    }


def part_one(configs: dict[str, Config], steps: int, rounds: int) -> None:
    medians = run(configs, steps, rounds, epochs=(1, 2))
    print(table("Part 1: per-step cost (epochs 1 and 2)", medians, "empty Callback"))
    own = own_work_per_step()
    step = medians["empty Callback"]
    share = own["sampler_cpu_share"] * step
    hooks = own["hooks_per_step"] * own["span"]
    print(
        f"  PerfMonitor's own work per step, timed directly: stage recorder {own['recorder'] * 1e6:.1f} µs, "
        f"loader wait timing {own['loader'] * 1e6:.1f} µs, sampler {own['sampler_cpu_share']:.2%} of a core "
        f"(= {share * 1e6:.1f} µs of a {step * 1e6:.0f} µs step), {own['hooks_per_step']:.1f} hooks timed "
        f"per step at {own['span'] * 1e9:.0f} ns each (= {hooks * 1e6:.1f} µs): "
        f"{(own['recorder'] + own['loader'] + share + hooks) * 1e6:.1f} µs in all; each hook Lightning runs "
        f"without timing it costs {own['action'] * 1e9:+.0f} ns against its default profiler"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--part", choices=("1", "2", "both"), default="both")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    part1: dict[str, Config] = {
        "no callback": lambda tmp: ([], {}),
        "empty Callback": lambda tmp: ([Callback()], {}),
        "PerfMonitor, every feature on": lambda tmp: ([PerfMonitor(run_dir=tmp, top_k_slowest=5)], {}),
        "Lightning ThroughputMonitor": lambda tmp: ([ThroughputMonitor(batch_size_fn=lambda b: 8)], {}),
    }
    if args.part != "2":
        part_one(part1, args.steps, args.rounds)
    if args.part == "1":
        return 0
    part2: dict[str, Config] = {
        "no callback": lambda tmp: ([], {}),
        "ProfilerCallback, window on epoch 1 only": lambda tmp: (
            [ProfilerCallback(profile_epochs=[1], profile_steps=20, output_dir=tmp, console=False)],
            {},
        ),
        'Trainer(profiler="pytorch")': lambda tmp: ([], {"profiler": "pytorch"}),
    }
    medians = run(part2, args.steps, args.rounds, epochs=(0, 2))
    print("\n" + table("Part 2: steps outside the profiler window (epochs 0 and 2)", medians, "no callback"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
