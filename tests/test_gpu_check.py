"""The GPU check's harness runs end to end on CPU (``--device cpu``: events stamped by the host clock)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_the_gpu_check_runs_on_cpu_and_writes_its_table(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    out = tmp_path / "gpu_check.md"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PERFKIT_PURE": "1"}
    cmd = [
        sys.executable,
        "benchmarks/gpu_check.py",
        "--device",
        "cpu",
        "--only",
        "launch",
        "events",
        "--out",
        str(out),
    ]
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=240, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    table = out.read_text(encoding="utf-8")
    assert "| launch-bound loop (300 tiny kernels) |" in table
    assert "| CUDA events per part: cost per step |" in table
    assert "FAILED" not in table
    raw = json.loads(out.with_suffix(".json").read_text(encoding="utf-8"))
    assert raw["launch-bound loop (300 tiny kernels)"]["kernels_s"] > 0
