"""``Options``: what every framework adapter's monitoring is asked to do, declared and checked once.

``perfkit_lightning.PerfMonitor`` and ``perfkit_hf.PerfkitCallback`` take these options under the
same names, with the same defaults and the same errors (``tests/monitor/test_options.py``
compares their signatures with the fields below); each adds only what its framework needs. An
adapter builds one ``Options`` in its constructor, so a bad value is refused there, naming the
parameter and the value, not when training starts.

>>> Options(stages=["val"], interval_s=30).intervals_plan().seconds
30
>>> Options(merge_timeout_s=0)
Traceback (most recent call last):
...
ValueError: merge_timeout_s must be a finite number > 0.0, got 0
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .._peaks import check_peak_tflops
from .._registry import Registry, check_registry
from .._validate import check_int, check_number
from ..names import STAGES
from ..resources import MAX_INTERVAL_S
from ..sinks import Sink, check_sinks
from ..stages import Intervals, check_stages, intervals_from

BatchSizeFn = Callable[[Any], int | None]
"""Counts the samples of a batch (None: not countable)."""
_SWITCHES = ("console", "save_run", "sample_resources", "user_series", "time_gradient_sync", "watch_syncs")


@dataclass(frozen=True)
class Options:
    """What a monitored run does; every adapter's shared arguments, with these defaults.

    - ``stages``: which of train, val, test, predict to publish (None: every stage).
    - ``prefix``: the metric prefix (``perf/val/step_ms_p95``).
    - ``console``: say each stage epoch's block (its account and first verdict) and, at the end of
      the run, its ranked verdicts, through ``logging``, clear of progress bars.
    - ``run_dir``: where the run directory goes (None: the framework's log folder, ``perfkit-run``
      in it); ``save_run=False`` writes none (and no ``verdicts.json``).
    - ``top_k_slowest``: the slowest steps kept per stage epoch, with their ``tag_step`` tags.
    - ``batch_size_fn``: counts a batch's samples (None: the first dimension of its first tensor).
    - ``sample_resources``: poll memory (and GPU use) every ``sample_interval_s`` seconds.
    - ``user_series``: the metrics carry every series the run recorded (sections, ``@timed``).
    - ``registry``: where records go (None: the current one).
    - ``sinks``: more ``perfkit.sinks`` sinks, each given every window's metrics.
    - ``intervals``, ``interval_steps``, ``interval_s``, ``warmup_steps``: a long epoch's interval
      windows (None: long epochs only, on the default plan; True: every epoch; False: never; or a
      ``perfkit.stages.Intervals``, a plan of one's own).
    - ``time_gradient_sync``: under DDP, time each rank's wait for the gradient all-reduce.
    - ``merge_timeout_s``: how long ranks wait for each other at an epoch's end to merge their windows.
    - ``flops_per_step``: a training step's FLOPs (None: counted once, on the first training step,
      with torch's ``FlopCounterMode``, on CUDA or where ``peak_tflops`` is given); ``peak_tflops``:
      the device's dense peak (None: NVIDIA's datasheet figure for the device and the step's
      dtypes, ``perfkit.resources.device_peak``). With both, each stage epoch's MFU; without, it
      abstains, saying why.
    - ``watch_syncs``: on CUDA, time where the host blocks on the device, by call site
      (``perfkit.torch.watch_syncs``).
    """

    stages: Iterable[str] | None = None
    prefix: str = "perf"
    console: bool = True
    run_dir: str | os.PathLike[str] | None = None
    save_run: bool = True
    top_k_slowest: int = 5
    batch_size_fn: BatchSizeFn | None = None
    sample_resources: bool = True
    sample_interval_s: float = 0.1
    user_series: bool = True
    registry: Registry | None = None
    sinks: Sequence[Sink] = field(default=())
    intervals: bool | Intervals | None = None
    interval_steps: int | None = None
    interval_s: float | None = None
    warmup_steps: int = 10
    time_gradient_sync: bool = True
    merge_timeout_s: float = 300.0
    flops_per_step: float | None = None
    peak_tflops: float | None = None
    watch_syncs: bool = True

    def __post_init__(self) -> None:
        fix = object.__setattr__  # frozen: normalised once, here
        if self.stages is not None:
            fix(self, "stages", check_stages(self.stages, "stages", among=STAGES))
        if not isinstance(self.prefix, str) or not self.prefix:
            raise ValueError(f"prefix must be a non-empty str, got {self.prefix!r}")
        if self.run_dir is not None and not isinstance(self.run_dir, (str, os.PathLike)):
            raise TypeError(f"run_dir must be a path or None, got {self.run_dir!r}")
        check_int(self.top_k_slowest, "top_k_slowest")
        if self.batch_size_fn is not None and not callable(self.batch_size_fn):
            raise TypeError(f"batch_size_fn must be callable or None, got {self.batch_size_fn!r}")
        check_number(self.sample_interval_s, "sample_interval_s", low=0, high=MAX_INTERVAL_S)
        check_registry(self.registry)
        fix(self, "sinks", tuple(check_sinks(self.sinks)))
        self.intervals_plan()  # refuses a bad interval_steps, interval_s, warmup_steps or intervals
        check_number(self.merge_timeout_s, "merge_timeout_s")
        if self.flops_per_step is not None:
            check_number(self.flops_per_step, "flops_per_step")
        check_peak_tflops(self.peak_tflops)
        for name in _SWITCHES:
            fix(self, name, bool(getattr(self, name)))

    def intervals_plan(self) -> Intervals | None:
        """When stage epochs are cut into interval windows (None: never)."""
        return intervals_from(self.intervals, self.interval_steps, self.interval_s, self.warmup_steps)
