"""A process family of our own for the sampler tests: a parent with a known set of children.

Measuring the test process's own children is fragile (a forkserver or a subprocess another
test left behind is a child too); a dedicated parent has exactly the children we gave it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import psutil

_PARENT = """
import signal, subprocess, sys
signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children that die are reaped at once, like joined workers
kids = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"]) for _ in range({n})]
print(" ".join(str(k.pid) for k in kids), flush=True)
sys.stdin.read()  # until the test closes our stdin
for k in kids:
    k.kill()
"""


class Family:
    def __init__(self, children: int) -> None:
        self.parent = subprocess.Popen(
            [sys.executable, "-c", _PARENT.format(n=children)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.parent.stdout is not None
        self.children = [int(pid) for pid in self.parent.stdout.readline().split()]

    def kill(self, pid: int) -> None:
        """Kill one child and wait until it is gone (the parent ignores SIGCHLD: no zombie is left)."""
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while psutil.pid_exists(pid) and time.monotonic() < deadline:
            time.sleep(0.01)

    def close(self) -> None:
        assert self.parent.stdin is not None
        self.parent.stdin.close()
        self.parent.wait(timeout=30)
