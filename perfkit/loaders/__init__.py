"""What perfkit knows about a DataLoader, below every area that reads it: plain numbers, no torch.

Three kinds of fact, each recorded or computed once and read by the stage metrics, the
findings, the run directory and the text alike:

* a timed loop's wait share and the workers that would end it (``loop_stats``, ``workers_needed``);
* what a loader ran with and what its batches cost in CPU, recorded as gauges of its window
  where its batches are handed out (``record_settings``, ``CpuSplit``): the bounds of any advice;
* what a loader trial measured (``TrialResult``: one row per setting, and the pick), so the run
  directory keeps it and a verdict's gain can come from it without torch (the trial itself,
  which needs torch, is ``perfkit.torch.trial``).

The worker advice built on these facts (the gain model, its proposals and their words) is
``perfkit.findings``'s; this area sits below the stage timeline because its metrics read it too.

    >>> workers_needed(0.030, 0.010)  # 30 ms a batch in a worker, 10 ms of loop a batch
    3
"""

from ._loops import LoopStats, all_loops, cores_for_workers, loop_stats, worker_count, workers_needed
from ._settings import CpuSplit, record_settings, usable_cores
from ._trial import MOST_PER_CORE, Growth, TrialResult, TrialSetting, first_round, grow, next_count, pick

__all__ = [
    "MOST_PER_CORE",
    "CpuSplit",
    "Growth",
    "LoopStats",
    "TrialResult",
    "TrialSetting",
    "all_loops",
    "cores_for_workers",
    "first_round",
    "grow",
    "loop_stats",
    "next_count",
    "pick",
    "record_settings",
    "usable_cores",
    "worker_count",
    "workers_needed",
]
