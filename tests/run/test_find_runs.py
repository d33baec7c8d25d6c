"""Where the user is: ``perfkit summary``, ``report`` and ``compare`` given a folder above runs
(``lightning_logs/``, Hydra's ``outputs/``, an HF ``output_dir``) read its newest run and name the
others. The runs are real, and short: ``perfkit.window`` and a ``RunWriter``."""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import pytest

import perfkit
from perfkit._cli import main
from perfkit.names import RUN_DIR_NAME
from perfkit.run import RunWriter, find_runs

window = functools.partial(perfkit.window, console=False)
"""perfkit.window, without its console block."""


def short_run(run_dir: Path, steps: int) -> Path:
    """A run of one training epoch of ``steps`` batches, written in a few milliseconds."""
    run = RunWriter(run_dir)
    reg = perfkit.Registry()
    with window("train", epoch=0, run=run, registry=reg) as w:
        for _ in w.iterate([np.zeros((2, 4))] * steps):
            pass
    run.finish(reg.snapshot())
    return run_dir


@pytest.fixture
def lightning_logs(tmp_path: Path) -> Path:
    """``lightning_logs/version_0..2/perfkit-run``, version_2 the newest (and the only one of 5 steps)."""
    for version, steps in enumerate([3, 3, 5]):
        short_run(tmp_path / "lightning_logs" / f"version_{version}" / RUN_DIR_NAME, steps)
    return tmp_path / "lightning_logs"


@pytest.fixture
def hydra_outputs(tmp_path: Path) -> Path:
    """Hydra's ``outputs/DATE/TIME/``: a script's run, then a Trainer's five levels down (the newest)."""
    outputs = tmp_path / "outputs"
    short_run(outputs / "2026-11-05" / "10-00-00" / RUN_DIR_NAME, 3)
    (outputs / "2026-11-05" / "10-00-00" / ".hydra").mkdir()
    short_run(outputs / "2026-11-06" / "09-30-00" / "lightning_logs" / "version_0" / RUN_DIR_NAME, 4)
    return outputs


def summary(path: Path, capsys: pytest.CaptureFixture[str], *more: str) -> tuple[int, str, str]:
    code = main(["summary", str(path), *more])
    out, err = capsys.readouterr()
    return code, out, err


def test_find_runs_lists_the_run_directories_below_newest_first(lightning_logs: Path) -> None:
    runs = find_runs(lightning_logs)
    assert runs == [lightning_logs / f"version_{v}" / RUN_DIR_NAME for v in (2, 1, 0)]
    assert find_runs(lightning_logs / "version_1" / RUN_DIR_NAME) == [runs[1]]  # a run is its own
    assert find_runs(lightning_logs, depth=1) == []  # the runs are two levels down
    assert len(find_runs(lightning_logs, limit=2)) < 3  # a bounded walk: it stops looking


def test_summary_of_lightning_logs_reads_the_newest_version_and_names_the_others(
    lightning_logs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = summary(lightning_logs, capsys)
    assert code == 0
    newest, *others = (lightning_logs / f"version_{v}" / RUN_DIR_NAME for v in (2, 1, 0))
    assert out.startswith(f"perfkit summary: {newest} (1 window")
    assert out.rstrip().splitlines()[-1] == (
        f"2 other runs below {lightning_logs}: {others[0]}, {others[1]} (perfkit summary PATH)"
    )


def test_summary_json_stays_json_and_names_the_others_on_stderr(
    lightning_logs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    code, out, err = summary(lightning_logs, capsys, "--json")
    assert code == 0
    assert json.loads(out)["job"]
    assert err.startswith(f"2 other runs below {lightning_logs}:")


def test_summary_of_hydra_outputs_finds_a_run_five_levels_down(
    hydra_outputs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = summary(hydra_outputs, capsys)
    deep = hydra_outputs / "2026-11-06" / "09-30-00" / "lightning_logs" / "version_0" / RUN_DIR_NAME
    assert code == 0
    assert out.startswith(f"perfkit summary: {deep} ")
    assert (
        f"1 other run below {hydra_outputs}: {hydra_outputs / '2026-11-05' / '10-00-00' / RUN_DIR_NAME}"
        in out
    )


def test_an_output_dir_with_its_run_is_read_as_before(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    output_dir = tmp_path / "output_dir"
    short_run(output_dir / RUN_DIR_NAME, 3)
    (output_dir / "checkpoint-8").mkdir()
    code, out, _ = summary(output_dir, capsys)
    assert code == 0
    assert out.startswith(f"perfkit summary: {output_dir / RUN_DIR_NAME} ")
    assert "other run" not in out


def test_a_folder_with_no_run_below_is_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "lightning_logs" / "version_0").mkdir(parents=True)
    code, _, err = summary(tmp_path / "lightning_logs", capsys)
    assert code == 2
    assert "not a perfkit run directory" in err


def test_report_and_compare_take_parent_folders(
    lightning_logs: Path, hydra_outputs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("matplotlib")
    assert main(["report", str(lightning_logs)]) == 0
    out, err = capsys.readouterr()
    assert out.strip() == str(lightning_logs / "version_2" / RUN_DIR_NAME / "report.html")
    assert err.startswith(f"2 other runs below {lightning_logs}:")
    assert main(["compare", str(lightning_logs), str(hydra_outputs)]) == 0  # the newest of each
    out, err = capsys.readouterr()
    assert f"before: {lightning_logs / 'version_2' / RUN_DIR_NAME}" in out
    assert f"after:  {hydra_outputs / '2026-11-06' / '09-30-00' / 'lightning_logs'}" in out
    assert err.splitlines() == [
        f"2 other runs below {lightning_logs}: {lightning_logs / 'version_1' / RUN_DIR_NAME}, "
        f"{lightning_logs / 'version_0' / RUN_DIR_NAME} (perfkit summary PATH)",
        f"1 other run below {hydra_outputs}: {hydra_outputs / '2026-11-05' / '10-00-00' / RUN_DIR_NAME} "
        "(perfkit summary PATH)",
    ]
