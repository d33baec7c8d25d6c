"""Stage epochs: one owner of "where did this epoch's time go", for every integration.

A *stage* is a loop over a data set (``train``, ``val``, ``test``, ``predict``); a *part*
is a piece of its time (data wait, step, callbacks, ...: ``perfkit.names``). ``StageRecorder`` records
a program's stage epochs once, however many consumers listen; each ends as a
``StageWindow`` with its ``Account`` (the wall time split into parts that add up to it),
which ``stage_metrics`` turns into flat, unit-suffixed metrics.

    rec = StageRecorder()
    rec.begin("train", epoch=0)
    ...
    window = rec.end("train")
    stage_metrics(window)["perf/train/time/data_wait_fraction"]

A long epoch is also cut into interval windows while it runs (``Intervals``: every N steps or
T seconds, after a warm-up), so a run gives its first answer in minutes, not when the epoch ends.

Under several ranks each epoch's window is merged over them at its end, bounded in time and
bytes: ``Ranks`` is the transport a framework provides (``perfkit.torch.gather_ranks``), and
``merge_ranks`` merges one rank's ``RankResult`` through one (what the recorder calls).

Where ranks wait for each other in collectives (``perfkit.torch.time_collectives``, DDP's
``time_gradient_sync``), ``communication`` reads an epoch's exposed communication (its share, by
step part, by collective, bytes per step) and ``straggler_parts`` where in the step its slow rank
is slow, and what the others wait in.

``check_stages`` is the check of every ``stages=`` argument (some of ``perfkit.names.STAGES``).
"""

from ..loaders import LoopStats, all_loops, cores_for_workers, loop_stats, worker_count, workers_needed
from ._account import PARTS, RESIDUAL_ZONES, Account, stage_account
from ._batch import batch_size
from ._choice import check_stages
from ._comm import Communication, StragglerParts, communication, straggler_parts
from ._device_parts import DeviceParts
from ._intervals import Intervals, intervals_from
from ._merge import EXACT_MAX, TOP_K, Merged, RankResult, Ranks
from ._merge import merge as merge_ranks
from ._metrics import metric_key, stage_metrics, stage_prefix
from ._recorder import Gather, StageListener, StageRecorder, check_listeners
from ._segments import Segments
from ._tags import tag_step, take_tags
from ._window import SCOPES, RankPart, SlowStep, StageWindow, keep_slowest

__all__ = [
    "EXACT_MAX",
    "PARTS",
    "RESIDUAL_ZONES",
    "SCOPES",
    "TOP_K",
    "Account",
    "Communication",
    "DeviceParts",
    "Gather",
    "Intervals",
    "LoopStats",
    "Merged",
    "RankPart",
    "RankResult",
    "Ranks",
    "Segments",
    "SlowStep",
    "StageListener",
    "StageRecorder",
    "StageWindow",
    "StragglerParts",
    "all_loops",
    "batch_size",
    "check_listeners",
    "check_stages",
    "communication",
    "cores_for_workers",
    "intervals_from",
    "keep_slowest",
    "loop_stats",
    "merge_ranks",
    "metric_key",
    "stage_account",
    "stage_metrics",
    "stage_prefix",
    "straggler_parts",
    "tag_step",
    "take_tags",
    "worker_count",
    "workers_needed",
]
