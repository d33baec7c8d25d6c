"""The README's and the quickstart's code runs as written: every ``python`` block, in order."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def blocks(doc: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", (ROOT / doc).read_text(), re.S)


@pytest.mark.parametrize("doc", ["README.md", "docs/quickstart.md"])
def test_every_python_block_runs_as_written(doc: str, tmp_path: Path) -> None:
    code = blocks(doc)
    assert code, doc
    script = tmp_path / "doc.py"
    script.write_text("\n\n".join(code))
    done = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
