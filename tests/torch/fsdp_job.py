"""One rank of an FSDP2 loop over gloo (``fully_shard`` per layer), each rank with its own clocks.

    python fsdp_job.py RANK WORLD PORT OUT MODE
    torchrun --nproc_per_node 2 fsdp_job.py torchrun OUT MODE [plain]

MODE: ``straggler`` (rank ``SLOW``'s first layer sleeps ``PLANTED_S`` in every forward: the others
wait for it in the next layer's all-gather), ``heavy`` (large layers and a tiny batch: mostly
all-gathers and reduce-scatters), ``balanced`` (every rank alike, compute enough to matter; each step
also prefetches its first layer's parameters asynchronously -- ``unshard(async_op=True)``, waited
for in forward -- and all-reduces its loss asynchronously, waited for after the optimizer step, as
a loop that logs a global loss does). Before perfkit wraps anything, the job puts its own clock
around ``torch.distributed.all_gather_single``, ``reduce_scatter_single`` and ``all_reduce`` (what
FSDP2 and the loop call; synchronous on CPU: the call is the rank's wait) and ``Work.wait`` (an
asynchronous one's wait), so every wait is known by the job's clock, with the phase of the step it
ran in (forward, backward, optimizer, rest) and the bytes each call moved (an all-gather's output, a
reduce-scatter's input). Each rank prints one JSON line: per epoch, by its own clock, the loop's
wall time, each phase's seconds, and the waits, calls and bytes by (phase, collective). Rank 0 writes
the run directory OUT. ``plain``: the same loop with no perfkit call (``perfkit run`` times it).
"""

from __future__ import annotations

import contextlib
import gc
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch.distributed.fsdp import fully_shard
from torch.utils.data import DataLoader, TensorDataset

import perfkit
import perfkit.torch
from perfkit.run import RunWriter

PLANTED_S = 0.03
SLOW = 1
EPOCHS = 3
SHAPES = {"straggler": (256, 4, 16), "heavy": (1024, 4, 2), "balanced": (256, 4, 512)}
"""Per mode: the layers' width, their number, the batch size."""
STEPS = 8

PHASE = ["idle"]  # where the step is, by the job's own clock


class Layer(torch.nn.Module):
    def __init__(self, width: int, slow_s: float) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(width, width)
        self.slow_s = slow_s

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.slow_s:
            time.sleep(self.slow_s)
        out: torch.Tensor = torch.relu(self.linear(x))
        return out


def clocked(seen: dict[str, dict[str, float]]) -> None:
    """The job's own clock around the collectives, installed before perfkit's."""
    works: dict[int, str] = {}
    for name, collective, big in (
        ("all_gather_single", "all_gather", 0),
        ("reduce_scatter_single", "reduce_scatter", "input"),
        ("all_reduce", "all_reduce", 0),
    ):
        original = getattr(dist, name)

        def timed(
            *args: Any, _f: Callable[..., Any] = original, _c: str = collective, _b: Any = big, **kw: Any
        ) -> Any:
            tensor = args[_b] if isinstance(_b, int) else kw[_b]
            add(seen, "bytes", _c, tensor.numel() * tensor.element_size())
            add(seen, "calls", _c, 1)
            t0 = time.perf_counter()
            work = _f(*args, **kw)
            if work is None:  # synchronous: the call is the wait
                add(seen, "waits", f"{PHASE[0]}.{_c}", time.perf_counter() - t0)
            else:
                works[id(work)] = _c
            return work

        setattr(dist, name, timed)
    cls = dist.distributed_c10d.Work
    wait = cls.wait

    def timed_wait(self: Any, *args: Any, **kwargs: Any) -> Any:
        collective = works.pop(id(self), None)
        t0 = time.perf_counter()
        try:
            return wait(self, *args, **kwargs)
        finally:
            if collective is not None:
                add(seen, "waits", f"{PHASE[0]}.{collective}", time.perf_counter() - t0)

    cls.wait = timed_wait


def add(seen: dict[str, dict[str, float]], what: str, key: str, x: float) -> None:
    seen[what][key] = seen[what].get(key, 0.0) + x


def main() -> None:  # run as a script only: pytest imports this file for its doctests
    torch.set_num_threads(1)
    plain = sys.argv[-1] == "plain"  # no perfkit call: perfkit run's to time
    if sys.argv[1] == "torchrun":  # its rank and world from torchrun's environment
        out, mode = Path(sys.argv[2]), sys.argv[3]
        dist.init_process_group("gloo")
    else:
        rank, world, port, out, mode = (
            int(sys.argv[1]),
            int(sys.argv[2]),
            sys.argv[3],
            Path(sys.argv[4]),
            sys.argv[5],
        )
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    rank = dist.get_rank()
    seen: dict[str, dict[str, float]] = {"waits": {}, "calls": {}, "bytes": {}}
    clocked(seen)
    width, depth, batch = SHAPES[mode]
    torch.manual_seed(0)
    slow = PLANTED_S if mode == "straggler" and rank == SLOW else 0.0
    model = torch.nn.Sequential(*[Layer(width, slow if i == 0 else 0.0) for i in range(depth)])
    for layer in model:
        fully_shard(layer)
    fully_shard(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    g = torch.Generator().manual_seed(rank)
    data = TensorDataset(torch.randn(STEPS * batch, width, generator=g))
    run = RunWriter(out) if rank == 0 and not plain else None
    loader = DataLoader(data, batch_size=batch)
    epochs = []
    for epoch in range(EPOCHS):
        for kept in seen.values():
            kept.clear()
        phases = dict.fromkeys(("forward", "backward", "optimizer", "rest"), 0.0)
        window = (
            contextlib.nullcontext(None)
            if plain
            else perfkit.window("train", epoch=epoch, run=run, gather=perfkit.torch.gather_ranks)
        )
        with window as w:
            t_epoch = time.perf_counter()
            for (x,) in loader if w is None else w.iterate(loader):
                t = [time.perf_counter()]
                PHASE[0] = "forward"
                if mode == "balanced":
                    model[0].unshard(async_op=True)  # waited for in the first layer's forward
                loss = model(x).square().mean()
                total = dist.all_reduce(loss.detach(), async_op=True) if mode == "balanced" else None
                t.append(time.perf_counter())
                PHASE[0] = "backward"
                loss.backward()
                t.append(time.perf_counter())
                PHASE[0] = "optimizer"
                opt.step()
                opt.zero_grad()
                t.append(time.perf_counter())
                PHASE[0] = "rest"
                if total is not None:
                    total.wait()
                t.append(time.perf_counter())
                PHASE[0] = "idle"
                for i, phase in enumerate(phases):
                    phases[phase] += t[i + 1] - t[i]
            wall = time.perf_counter() - t_epoch
        epochs.append({"wall_s": wall, "phases": phases, **{k: dict(v) for k, v in seen.items()}})
    if run is not None:
        run.finish(perfkit.snapshot())
    print(json.dumps({"rank": rank, "epochs": epochs}), flush=True)
    # the ranks end together and the group is destroyed while the interpreter is whole (an
    # abandoned group can abort at exit: tests/torch/ranked_job.py)
    dist.barrier()
    dist.destroy_process_group()
    gc.collect()


if __name__ == "__main__":
    main()
