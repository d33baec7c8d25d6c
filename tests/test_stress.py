"""Many threads recording at once, with snapshots taken while they record: nothing lost, nothing doubled."""

from __future__ import annotations

import threading

import perfkit


def test_eight_threads_times_fifty_thousand_records_are_exact() -> None:
    threads_n, per_thread = 8, 50_000
    reg = perfkit.Registry(capacity=1_000)
    barrier = threading.Barrier(threads_n + 1)
    done = threading.Event()

    def record(i: int) -> None:
        barrier.wait()
        for k in range(per_thread):
            # durations 0..9 ns by construction: the exact total is known in advance
            reg.record(f"t{i % 2}", 1_000, 1_000 + k % 10)

    workers = [threading.Thread(target=record, args=(i,)) for i in range(threads_n)]
    for w in workers:
        w.start()
    barrier.wait()
    seen = []
    while not done.is_set():
        snap = reg.snapshot()  # concurrent with the writers
        seen.append(sum(snap[n].count for n in snap))
        if not any(w.is_alive() for w in workers):
            done.set()
    for w in workers:
        w.join()
    final = reg.snapshot()
    per_series = threads_n // 2 * per_thread
    assert {n: final[n].count for n in final} == {"t0": per_series, "t1": per_series}
    assert final["t0"].total_s == final["t1"].total_s == per_series * 4.5e-9
    assert seen == sorted(seen)  # counts only grow between snapshots
    assert len(seen) > 1
