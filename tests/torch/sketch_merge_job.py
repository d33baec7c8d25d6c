"""One rank of a plain ``torch.distributed`` loop over gloo, merged by ``perfkit.torch.TorchRanks``.

    python sketch_merge_job.py RANK WORLD PORT OUT MODE

MODE: ``exact`` (every rank's whole window travels), ``sketched`` (``exact_max=1``: the fixed-size
vectors), ``killed`` (sketched; the last rank exits as its last epoch begins, without a word),
``oneoff`` (sketched; only rank 1 is slow, in epoch 1 alone).
Rank r's loader sleeps ``DATA_S[r]`` per batch (rank 2 the longest: the straggler in every epoch),
each step sleeps a planted time and, but in ``killed``, all-reduces a tensor (the gradient sync).
Each rank writes OUT/clock_rankN.json: by its own clock, per epoch its wall time, its data wait
and every step's duration; rank 0 writes the run directory OUT/run.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist

import perfkit
import perfkit.torch
from perfkit.run import RunWriter

DATA_S = (0.002, 0.002, 0.012, 0.002)
STEPS, EPOCHS = 12, 3


def data_s(mode: str, rank: int, epoch: int) -> float:
    if mode == "oneoff":
        return DATA_S[2] if (rank, epoch) == (1, 1) else DATA_S[0]
    return DATA_S[rank]


def step_s(rank: int, i: int) -> float:
    """A spread of step times (1 to 6 ms), different on every rank, for the percentiles to span."""
    return 0.001 + 0.005 * (((i * 7 + rank * 3) % STEPS) / STEPS)


def main(rank: int, world: int, port: str, out: Path, mode: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    ranks = perfkit.torch.TorchRanks(timeout_s=3.0, exact_max=8 if mode == "exact" else 1)
    run = RunWriter(out / "run") if rank == 0 else None
    clock: list[dict[str, object]] = []
    for epoch in range(EPOCHS):
        if mode == "killed" and rank == world - 1 and epoch == EPOCHS - 1:
            os._exit(0)  # a rank lost: no merge, no word
        waited, steps = 0.0, []
        with perfkit.window("train", epoch=epoch, run=run, gather=ranks) as w:
            t_epoch = time.perf_counter()

            def batches(sleep_s: float) -> object:
                for _ in range(STEPS):
                    time.sleep(sleep_s)
                    yield torch.ones(4)

            it = iter(w.iterate(batches(data_s(mode, rank, epoch))))
            for i in range(STEPS):
                t0 = time.perf_counter()
                batch = next(it)
                t1 = time.perf_counter()
                waited += t1 - t0
                time.sleep(step_s(rank, i))
                if mode != "killed":
                    dist.all_reduce(batch)
                steps.append(time.perf_counter() - t1)
            for _ in it:
                pass
            wall = time.perf_counter() - t_epoch
        clock.append({"wall_s": wall, "waited_s": waited, "steps_s": steps})
    if run is not None:
        run.finish(perfkit.snapshot())
    (out / f"clock_rank{rank}.json").write_text(json.dumps(clock))
    if mode == "killed":
        os._exit(0)  # a peer is gone: the group cannot be ended together
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], Path(sys.argv[4]), sys.argv[5])
