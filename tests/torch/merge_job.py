"""One rank of a fixed-size merge over gloo: ``merge_job.py RANK WORLD PORT [absent_rank]``.

Each rank sketches its own samples and merges (``start_merge``); rank 0 prints the merged p99,
the exact p99 of every rank's samples, the rows and the seconds the merge took. A rank named
``absent_rank`` never joins the merge: the others must come back within the timeout.
"""

from __future__ import annotations

import json
import os
import sys
import time

import numpy as np
import torch.distributed as dist

from perfkit._sketch import Sketch
from perfkit.torch._ddp import start_merge


def samples(r: int) -> np.ndarray:
    return np.random.default_rng(r).lognormal(np.log(0.01 * (1 + r)), 0.4, size=1000)


def main() -> None:  # run as a script only: pytest imports this file for its doctests
    rank, world, port = (int(a) for a in sys.argv[1:4])
    absent = int(sys.argv[4]) if len(sys.argv) > 4 else -1
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    mine = samples(rank)
    if rank == absent:
        time.sleep(4)  # lags past the others' timeout
        os._exit(0)
    t0 = time.perf_counter()
    merge = start_merge(Sketch.of(mine).counts, np.array([float(rank), mine.sum()]))
    done = merge.result(timeout_s=2.0)
    took = time.perf_counter() - t0
    if rank == 0:
        if done is None:
            print(json.dumps({"answered": False, "took_s": took}), flush=True)
        else:
            counts, rows = done
            every = np.concatenate([samples(r) for r in range(world)])
            print(
                json.dumps(
                    {
                        "answered": True,
                        "p99": Sketch(counts).quantile(0.99),
                        "exact_p99": float(np.quantile(every, 0.99, method="lower")),
                        "rows": rows.tolist(),
                        "took_s": took,
                    }
                ),
                flush=True,
            )

    os._exit(0)  # a process group with a peer gone cannot be destroyed cleanly; nothing is left to flush


if __name__ == "__main__":
    main()
