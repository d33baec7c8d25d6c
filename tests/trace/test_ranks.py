"""analyze_ranks: a directory of one trace per rank, side by side, and the straggler with what slows it.

Hand-built ranks (µs from 0), then the two real ranks of ``../shared/traces/hta_sampled_2rank``
against the plain reader.
"""

from __future__ import annotations

import json
import shutil
import tracemalloc
from pathlib import Path

import pytest

from perfkit.reports import ranks_text
from perfkit.trace import Cause, analyze_ranks, analyze_trace
from tests.trace.plain_reader import read_facts
from tests.trace.trace_builder import Event, kernel, mark, op, step, write_trace

REAL = Path(__file__).resolve().parents[2] / ".." / "shared" / "traces" / "hta_sampled_2rank"


def rank_events(backward_us: float, wait_us: float) -> list[Event]:
    """Two 200 µs steps: a backward of ``backward_us``, then an all-reduce that waits ``wait_us`` alone."""
    events: list[Event] = []
    for i, t in enumerate((0, 200)):
        events += [step(i, t, 200), mark("## backward ##", t, backward_us), op("aten::mm", t, 10)]
        events.append(kernel("gemm", t, backward_us))
        events.append(
            kernel("ncclKernel_AllReduce(ncclDevComm*)", t + backward_us - 10, wait_us + 10, stream=20)
        )
    return events


def write_ranks(folder: Path, ranks: dict[int, tuple[float, float]]) -> Path:
    folder.mkdir()
    for rank, (backward, wait) in ranks.items():
        write_trace(
            folder / f"trace_{rank}.json.gz", rank_events(backward, wait), distributedInfo={"rank": rank}
        )
    return folder


def test_the_straggler_is_the_rank_the_others_wait_for_and_backward_is_what_slows_it(tmp_path: Path) -> None:
    folder = write_ranks(tmp_path / "run", {0: (100, 80), 1: (150, 30), 2: (100, 80)})
    r = analyze_ranks(folder)
    assert [a.rank for a in r.ranks] == [0, 1, 2]
    assert [a.span_us / a.step_count for a in r.ranks] == [200, 200, 200]  # the collective evens them out
    s = r.straggler
    assert s is not None
    assert (s.rank, s.work_us, s.others_work_us) == (1, 170, 120)  # step time less comm running alone
    assert s.excess == pytest.approx(170 / 120 - 1)
    assert s.causes == (Cause("part", "backward", 150, 100), Cause("kernel", "gemm", 150, 100))
    text = ranks_text(r, width=120)
    assert "Straggler: rank 1, 170.0 µs of work per step" in text
    assert "+50.0 µs  150.0 µs  100.0 µs  part    backward" in text


def test_ranks_within_one_percent_have_no_straggler(tmp_path: Path) -> None:
    r = analyze_ranks(write_ranks(tmp_path / "run", {0: (100, 80), 1: (100.5, 79.5)}))
    assert r.straggler is None
    assert "Straggler: none" in ranks_text(r)


def test_a_rank_is_the_traces_own_else_the_one_in_its_name_else_its_place(tmp_path: Path) -> None:
    folder = tmp_path / "run"
    folder.mkdir()
    write_trace(folder / "a.json", rank_events(100, 80), distributedInfo={"rank": 7})
    write_trace(folder / "worker_rank-3.pt.trace.json", rank_events(100, 80))
    write_trace(folder / "z.json", rank_events(100, 80))
    (folder / "notes.txt").write_text("not a trace")
    assert [(a.rank, Path(a.path).name) for a in analyze_ranks(folder).ranks] == [
        (2, "z.json"),
        (3, "worker_rank-3.pt.trace.json"),
        (7, "a.json"),
    ]


def test_a_directory_without_traces_or_a_missing_one_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no trace files"):
        analyze_ranks(tmp_path)
    with pytest.raises(FileNotFoundError, match="not a directory"):
        analyze_ranks(tmp_path / "nope")


def test_ranks_are_analysed_one_at_a_time_so_memory_stays_at_one_traces(tmp_path: Path) -> None:
    one = write_trace(
        tmp_path / "one.json",
        [step(0, 0, 10**6), *(op(f"aten::op{i % 50}", i * 5, 4) for i in range(20_000))],
    )
    folder = tmp_path / "run"
    folder.mkdir()
    for i in range(4):
        shutil.copy(one, folder / f"rank-{i}.json")

    def peak(work: object) -> int:
        tracemalloc.start()
        try:
            work()  # type: ignore[operator]
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    assert peak(lambda: analyze_ranks(folder)) < 1.5 * peak(lambda: analyze_trace(one))


def test_the_json_of_a_directory_is_strict_json(tmp_path: Path) -> None:
    r = analyze_ranks(write_ranks(tmp_path / "run", {0: (100, 80), 1: (150, 30)}), top_k=1)
    data = json.loads(json.dumps(r.to_dict(), allow_nan=False))
    assert data["straggler"]["rank"] == 1
    for a in data["ranks"]:
        assert [len(a[k]) for k in ("top_cpu_ops", "top_cuda_kernels", "annotations", "idle")] == [1, 1, 1, 2]


@pytest.mark.skipif(not REAL.is_dir(), reason=f"the shared real traces are not in {REAL.parent}")
def test_the_two_real_ranks_name_the_straggler_the_plain_reader_finds() -> None:
    facts = {f.rank: f for f in (read_facts(p) for p in sorted(REAL.glob("*.json.gz")))}

    def work(rank: int) -> float:
        f = facts[rank]
        comm, _, overlap = f.comm or (0.0, 0.0, 0.0)
        return (f.step_us - (comm - overlap)) / f.steps

    r = analyze_ranks(REAL)
    assert r.straggler is not None
    assert r.straggler.rank == max(facts, key=work)
    assert r.straggler.work_us == pytest.approx(work(r.straggler.rank), rel=1e-6)
    assert r.straggler.causes
