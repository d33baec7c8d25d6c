"""The examples run, with tiny settings, exactly as a user would start them."""

from __future__ import annotations

import os
import runpy
import subprocess
import sys
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

from perfkit.names import RUN_DIR_NAME

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = ROOT / "examples" / "ocr_dbnet" / "configs"


def test_the_preset_overrides_compose() -> None:
    overrides = [
        "callbacks.profiler.enabled=true",
        "callbacks.profiler.profile_epochs=[1]",
        "callbacks.performance_profiler.verbose=true",
        "trainer.max_epochs=2",
    ]
    with initialize_config_dir(config_dir=str(CONFIGS), version_base="1.3"):
        cfg = compose("demo", overrides=overrides)
    assert cfg.callbacks.profiler.enabled is True
    assert list(cfg.callbacks.profiler.profile_epochs) == [1]
    assert cfg.callbacks.performance_profiler.verbose is True
    assert cfg.trainer.max_epochs == 2
    assert set(cfg.callbacks) == {"perf_monitor", "performance_profiler", "throughput_monitor", "profiler"}
    assert cfg.callbacks.perf_monitor._target_ == "perfkit_lightning.PerfMonitor"


SHORT_PROFILE = ("callbacks.profiler.profile_steps=1", "callbacks.profiler.warmup_steps=0")


def run_tiny_demo(tmp_path: Path, *overrides: str, **env: str) -> subprocess.CompletedProcess[str]:
    """The demo on a few small receipts, its outputs under ``tmp_path``."""
    tiny = [
        "data.train_size=8",
        "data.val_size=4",
        "data.image_size=128",
        "data.val_image_size=128",
        "data.lines=[3,5]",
        "data.val_lines=[3,5]",
        "pretrain.epochs=1",
        f"pretrain.cache_dir={tmp_path / 'cache'}",
        f"hydra.run.dir={tmp_path / 'out'}",
    ]
    return subprocess.run(
        [sys.executable, "-m", "examples.ocr_dbnet", *tiny, *overrides],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, **env},
    )


def test_the_ocr_demo_runs_end_to_end(tmp_path: Path) -> None:
    done = run_tiny_demo(tmp_path, *SHORT_PROFILE)
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    for text in (
        "[perfkit] val epoch 1",
        "[perfkit] train epoch 1",
        "[Profiler] Trace exported",
        "[demo] Outputs:",
    ):
        assert text in out
    assert "Where validation spent its time" in out
    assert (tmp_path / "out" / "csv" / "metrics.csv").exists()
    assert (tmp_path / "out" / "csv" / RUN_DIR_NAME / "report.html").exists()
    assert list((tmp_path / "out" / "csv" / RUN_DIR_NAME / "traces").glob("val_epoch1*.json.gz"))
    job_log = (tmp_path / "out" / "__main__.log").read_text()  # Hydra's job log has perfkit's lines too
    assert "[perfkit] val epoch 1" in job_log


def test_the_ocr_demo_disabled_trains_and_records_nothing(tmp_path: Path) -> None:
    """PERFKIT_DISABLED=1: the same run, every perfkit entry point a pass-through, no run directory."""
    done = run_tiny_demo(tmp_path, *SHORT_PROFILE, PERFKIT_DISABLED="1")
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "out" / "csv" / "metrics.csv").exists()
    assert not (tmp_path / "out" / "csv" / RUN_DIR_NAME).exists()
    assert "[perfkit] val epoch" not in done.stdout
    assert "perfkit is disabled" in done.stdout


def test_the_presets_own_override_line_runs_the_demo_with_that_preset_alone(tmp_path: Path) -> None:
    """``callbacks=performance_profiler callbacks.performance_profiler.verbose=true``, verbatim: the
    preset alone (no PerfMonitor, so no run directory to summarise), and no error."""
    done = run_tiny_demo(
        tmp_path, "callbacks=performance_profiler", "callbacks.performance_profiler.verbose=true"
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "[Performance] Validation epoch 1" in done.stdout
    assert "nothing to summarise" in done.stdout


def test_the_standalone_example_prints_a_report_per_epoch(capsys: pytest.CaptureFixture[str]) -> None:
    runpy.run_path(str(ROOT / "examples" / "standalone.py"), run_name="__main__")
    out = capsys.readouterr().out
    assert out.count("== epoch") == 2
    assert "collate" in out
    assert "waiting" in out


def test_the_minimal_lightning_example(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    runpy.run_path(str(ROOT / "examples" / "lightning_minimal.py"), run_name="__main__")
    (csv,) = tmp_path.glob("lightning_logs/minimal/version_0/metrics.csv")
    assert "perf/train/step_ms_p95" in csv.read_text().splitlines()[0]


def test_the_hugging_face_example_writes_its_run_under_the_output_dir(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "hf_trainer.py"), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    said = done.stdout + done.stderr
    assert said.count("[perfkit] train epoch") == 2
    assert said.count("[perfkit] val epoch") == 2
    assert "the run's verdicts" in said
    assert (tmp_path / "perfkit-run" / "verdicts.json").exists()


@pytest.mark.parametrize(("example", "args"), [("accelerate_loop.py", []), ("fabric_loop.py", ["1"])])
def test_the_accelerate_and_fabric_loops_write_a_run_and_log_each_epoch(
    tmp_path: Path, example: str, args: list[str]
) -> None:
    """One process here (two: tests/torch/test_ranked_loops.py runs the same recipe under both)."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / example), str(tmp_path / "run"), *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stderr.count("[perfkit] train epoch") == 2
    lines = (tmp_path / "run" / "windows.jsonl").read_text().splitlines()
    assert len(lines) == 2
