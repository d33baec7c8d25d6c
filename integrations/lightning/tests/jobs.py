"""Running a multi-process job script (DDP over gloo) from a test: a clean environment, a bound
on its time, and a hung job killed as a whole."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

DIST_ENV = ("LOCAL_RANK", "RANK", "WORLD_SIZE", "NODE_RANK", "MASTER_ADDR", "MASTER_PORT", "GROUP_RANK")
"""What torch.distributed reads from the environment: a job launched from a test starts without it."""


def run_job(job: Path, out: Path, timeout_s: float = 240) -> str:
    """Run ``python JOB OUT`` to the end and return its output; fail the test if it hangs or fails."""
    env = {k: v for k, v in os.environ.items() if k not in DIST_ENV}
    # Its own session: Lightning ignores SIGTERM, so a hung run is killed as a group with SIGKILL.
    proc = subprocess.Popen(
        [sys.executable, str(job), str(out)],
        env=env,
        start_new_session=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        output, _ = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        output, _ = proc.communicate()
        pytest.fail(f"the job {job.name} hung:\n" + output[-3000:])
    assert proc.returncode == 0, output[-3000:]
    return output
