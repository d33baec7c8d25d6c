"""CPU cost of the ResourceSampler at 10 Hz with every source that can run here, and 4 child processes.

    python benchmarks/bench_sampler.py [--seconds 20]

Prints the sampling thread's own CPU time (``time.thread_time`` inside the thread)
as a share of one core over the run, and per sample. On a machine without an
NVIDIA driver the NVML and torch.cuda sources are off, which the output says.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time

import perfkit


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--children", type=int, default=4, help="child processes, like DataLoader workers")
    args = parser.parse_args(argv)
    children = [
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
        for _ in range(args.children)
    ]
    try:
        import torch  # noqa: F401  (the torch.cuda source only runs where torch is imported)

        reg = perfkit.Registry()
        sampler = perfkit.ResourceSampler(0.1, registry=reg)
        t0 = time.monotonic()
        with sampler:
            time.sleep(args.seconds)
        wall = time.monotonic() - t0
    finally:
        for c in children:
            c.kill()
            c.wait()
    share = sampler.cpu_time_s / wall
    print(f"sources on: {', '.join(sampler.sources)}; {sampler.samples} samples in {wall:.1f} s")
    print(f"gauges per sample: {len(reg.snapshot().gauges)}")
    print(
        f"sampler thread CPU: {sampler.cpu_time_s * 1e3:.1f} ms = {share:.2%} of one core at 10 Hz "
        f"({sampler.cpu_time_s / sampler.samples * 1e6:.0f} µs per sample)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
