"""The HTML report: every section from a run directory, self-contained, and rendered by Chromium."""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

import perfkit
from perfkit._cli import main
from perfkit.reports import write_html_report
from perfkit.reports.html._page import SECTIONS
from perfkit.run import RunWriter
from tests.conftest import FakeClock
from tests.run.run_dirs import add_trace, synthetic_run

window = functools.partial(perfkit.window, console=False)
"""perfkit.window, without its console block."""

CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
    "--enable-logging=stderr",
    "--v=0",
]


@pytest.fixture
def synthetic(tmp_path: Path, clock: FakeClock, reg: perfkit.Registry) -> Path:
    return synthetic_run(tmp_path / "run", clock, reg, trace=True)


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The report of a synthetic run (see run_dirs), written once for the tests that only read it."""
    clock = FakeClock()
    run = synthetic_run(
        tmp_path_factory.mktemp("page") / "run", clock, perfkit.Registry(clock=clock), trace=True
    )
    return write_html_report(run).read_text()


def section(page: str, name: str) -> str:
    match = re.search(rf'<section id="{name}">(.*?)</section>', page, re.S)
    assert match, f"no section {name!r}"
    return match.group(1)


def test_every_section_has_its_heading_and_the_plots_are_matplotlib_svg(page: str) -> None:
    assert re.findall(r'<section id="(\w+)"><h2>', page) == list(SECTIONS)
    assert len(re.findall(r"<svg ", section(page, "steps"))) == 1
    assert len(re.findall(r"<svg ", section(page, "time"))) == 1  # no worker plot: no workers
    assert len(re.findall(r"<svg ", section(page, "memory"))) == 1
    assert len(re.findall(r"<svg ", section(page, "profiler"))) == 1
    assert "<script" not in page


def test_the_page_opens_with_the_top_verdict_and_lists_every_verdict_by_rank(page: str) -> None:
    headline = re.search(r'<p class="headline">(.*?)</p>', page)
    assert headline
    # the cause, with the symptom it explains said first (validation slower than training per sample)
    assert headline.group(1).startswith(
        "<strong>INPUT_BOUND</strong> · 46% of the run: validation takes 2.1x"
    )
    assert "; validation waits for its data loader" in headline.group(1)
    rows = re.findall(
        r"<tr><td>(\d+)</td><td>(\w+)</td><td>(\w+ \d+)</td><td>(\d+%)</td>", section(page, "findings")
    )
    assert rows[0] == ("1", "INPUT_BOUND", "val 2", "80%")
    assert ("SLOW_SECTION", "train 2", "86%") in [r[1:] for r in rows]
    assert "EVAL_SLOWER_THAN_TRAIN" not in [r[1] for r in rows]  # said inside the cause, above
    assert [int(r[0]) for r in rows] == list(range(1, len(rows) + 1))


def test_time_section_has_the_section_tree_with_self_time(page: str) -> None:
    time_section = section(page, "time")
    row = re.search(r'<tr><td class="tree">postprocess</td>(.*?)</tr>', time_section)
    assert row
    assert re.findall(r"<td>(.*?)</td>", row.group(1))[:3] == ["12", "36.00 ms", "36.00 ms"]


def test_each_stage_has_its_own_section_tree_and_statistics(
    tmp_path: Path, clock: FakeClock, reg: perfkit.Registry
) -> None:
    """A section that runs in training and validation: its p95 and max are each stage's own."""
    from tests.run.run_dirs import MS, SlowLoader

    run = RunWriter(tmp_path / "run")
    for stage, ms in (("train", 1), ("val", 10)):
        with window(stage, epoch=0, run=run, registry=reg) as w:
            for _ in w.iterate(SlowLoader(clock, batches=4, size=2, wait_ns=MS)):
                with perfkit.section("decode", registry=reg):
                    clock.advance(ms * MS)
    run.finish(reg.snapshot())
    time_section = section(write_html_report(tmp_path / "run").read_text(), "time")
    trees = dict(re.findall(r"<h4>(\w+)</h4>(<table>.*?</table>)", time_section))
    assert set(trees) == {"training", "validation"}
    for stage, expected in (("training", "1.00 ms"), ("validation", "10.00 ms")):
        row = re.search(r'<td class="tree">decode</td>(.*?)</tr>', trees[stage])
        assert row
        count, _total, _self, mean, p95, high = re.findall(r"<td>(.*?)</td>", row.group(1))[:6]
        assert (count, mean, p95, high) == ("4", expected, expected, expected), stage


def test_slowest_steps_and_profiler_windows_with_a_relative_trace_link(page: str) -> None:
    assert "<td>train</td><td>2</td><td>0</td><td>0</td><td>6.00 ms</td>" in section(page, "slowest")
    profiler = section(page, "profiler")
    assert (
        '<h3>train epoch 1, rank 0</h3><p>trace: <a href="traces/train_epoch1.pt.trace.json.gz">' in profiler
    )
    assert "<th>CPU op</th>" in profiler
    assert "<td>aten::addmm</td>" in profiler


def test_the_page_references_nothing_outside_itself(synthetic: Path) -> None:
    page = write_html_report(synthetic, synthetic.parent / "elsewhere.html").read_text()
    assert not re.search(r"""(?:src|href)\s*=\s*["']?(?:https?:)?//""", page)
    assert not re.search(r"url\((?!#)|@import|<link|<script|<img", page)  # url(#clip) is in-page
    assert 'href="run/traces/train_epoch1.pt.trace.json.gz"' in page  # relative to the page


def test_a_killed_run_still_reports_and_says_what_is_missing(
    tmp_path: Path, clock: FakeClock, reg: perfkit.Registry
) -> None:
    run = synthetic_run(tmp_path / "run", clock, reg, finish=False)
    text = (run / "windows.jsonl").read_text()
    (run / "windows.jsonl").write_text(text[: text.rindex('{"stage"') + 50])
    page = write_html_report(run).read_text()
    findings = section(page, "findings")
    assert "windows.jsonl line 6 is truncated (the run was killed): skipped" in findings
    assert "final.json is missing: the run did not finish" in findings
    assert "memory below is the sum of the windows" in findings
    assert "no profiler windows in this run" in section(page, "profiler")
    assert "<svg " in section(page, "memory")


def test_cli_writes_where_asked_and_lists_a_broken_file_it_skipped(
    synthetic: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["report", str(synthetic), "-o", str(tmp_path / "out.html")]) == 0
    assert capsys.readouterr().out.strip() == str(tmp_path / "out.html")
    assert (tmp_path / "out.html").read_text().startswith("<!DOCTYPE html>")
    (synthetic / "windows" / "val_epoch1.json").write_text("{not json")
    assert main(["report", str(synthetic)]) == 0
    assert capsys.readouterr().err == ""
    findings = section((synthetic / "report.html").read_text(), "findings")
    assert "windows.jsonl line 4: val_epoch1.json: snapshot: not JSON" in findings
    assert main(["report", str(tmp_path / "no-run")]) == 2
    assert capsys.readouterr().err.startswith("perfkit: error: run directory")


# ---- a real run, opened in headless Chromium ----------------------------------------------------


@pytest.fixture(scope="session")
def chromium() -> str:
    """Debian's chromium; installed with apt-get when missing and running as root, else a skip."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found:
        return found
    if os.geteuid() != 0:
        pytest.skip("chromium is not installed (apt-get install -y chromium needs root)")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = ["apt-get", "install", "-y", "--no-install-recommends", "chromium"]
    done = subprocess.run(install, env=env, capture_output=True, text=True, timeout=900)
    if done.returncode != 0:  # stale package lists: refresh them once
        subprocess.run(["apt-get", "update"], env=env, capture_output=True, timeout=300)
        done = subprocess.run(install, env=env, capture_output=True, text=True, timeout=900)
    if done.returncode != 0 or not shutil.which("chromium"):
        pytest.skip(f"apt-get install -y chromium failed: {done.stderr.strip()[-300:]}")
    return str(shutil.which("chromium"))


class Rows:
    """A dataset whose items take a few ms to load (in DataLoader workers), timed as ``load``."""

    def __len__(self) -> int:
        return 24

    @perfkit.timed("load")
    def __getitem__(self, i: int) -> np.ndarray:
        time.sleep(0.003)  # stands for reading and decoding a file; nothing here measures it
        return np.full(8, float(i), dtype=np.float32)


@pytest.fixture(scope="module")
def real_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two epochs with two DataLoader workers per stage, process memory sampled, one trace."""
    pytest.importorskip("torch")
    pytest.importorskip("psutil")  # the sampler's process source
    from torch.utils.data import DataLoader

    import perfkit.torch as ptorch

    path = tmp_path_factory.mktemp("real") / "run"
    reg = perfkit.Registry()
    run = RunWriter(path)
    with perfkit.use_registry(reg), perfkit.ResourceSampler(0.02, sources=["process"]):
        for epoch in range(2):
            for stage in ("train", "val"):
                loader = DataLoader(Rows(), batch_size=4, num_workers=2, multiprocessing_context="fork")
                with window(stage, epoch=epoch, run=run) as w:
                    for batch in w.iterate(ptorch.instrument(loader, stage)):
                        with perfkit.section("forward"):
                            (batch @ batch.T).sum()
        add_trace(run, stage="val", epoch=1)
        run.finish(reg.snapshot())
    return path


def render(chromium: str, page: Path, tmp: Path) -> tuple[str, str, Path]:
    """Open ``page`` once: its DOM, Chromium's log and a 1280x2400 screenshot."""
    shot = tmp / "shot.png"
    command = [chromium, *CHROMIUM_FLAGS, f"--user-data-dir={tmp / 'profile'}", "--dump-dom"]
    command += [f"--screenshot={shot}", "--window-size=1280,2400", page.as_uri()]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout, done.stderr, shot


@pytest.mark.timeout(1200)  # a first run may install chromium
def test_chromium_renders_every_section_with_no_console_message_and_a_drawn_page(
    chromium: str, real_run: Path, tmp_path: Path
) -> None:
    from matplotlib.image import imread

    dom, log, shot = render(chromium, write_html_report(real_run), tmp_path)
    assert [m for m in log.splitlines() if ":CONSOLE" in m] == []
    assert re.findall(r'<section id="(\w+)">', dom) == list(SECTIONS)
    sizes = re.findall(r'<svg [^>]*width="([\d.]+)pt" height="([\d.]+)pt"', dom)
    assert len(sizes) == 5  # steps, time split, workers, memory, profiler
    assert all(float(w) > 100 and float(h) > 50 for w, h in sizes)
    pixels = imread(shot)[..., :3]
    assert pixels.shape == (2400, 1280, 3)
    rgb = (pixels * 255).astype(np.uint32)
    colours = np.unique(rgb[..., 0] << 16 | rgb[..., 1] << 8 | rgb[..., 2])
    assert len(colours) > 50  # text, lines, bars and shaded windows, not a flat page
    assert 0.05 < (pixels < 0.95).any(axis=-1).mean() < 0.9  # share of pixels that are not white


@pytest.mark.timeout(1200)  # a first run may install chromium
def test_the_console_check_sees_a_script_error(chromium: str, tmp_path: Path) -> None:
    page = tmp_path / "broken.html"
    page.write_text("<!DOCTYPE html><html><body><script>undefinedFunction()</script></body></html>")
    _, log, _ = render(chromium, page, tmp_path)
    assert any(":CONSOLE" in m and "Uncaught ReferenceError" in m for m in log.splitlines())
