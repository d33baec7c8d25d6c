"""perfkit for PyTorch Lightning.

    from perfkit_lightning import PerfMonitor, tag_step
    trainer = lightning.Trainer(callbacks=[PerfMonitor(console=True)])

``PerfMonitor`` logs per-epoch train/val/test/predict metrics (``perf/val/step_ms_p95``,
``perf/train/time/data_wait_fraction``, ...) to every logger, merges DDP ranks, and writes a
run directory for ``perfkit report``. ``PerformanceProfilerCallback`` and
``ThroughputMonitorCallback`` are presets with the keys of our users' earlier callbacks;
``ProfilerCallback`` opens torch.profiler windows on chosen epochs and reads the traces.
Stacked on one Trainer they share one stage timeline: each step is recorded once.
``STAGES`` are the stages a callback's ``stages=`` picks from.
"""

from perfkit.names import STAGES
from perfkit.stages import tag_step

from ._monitor import PerfMonitor
from ._presets import PerformanceProfilerCallback, ThroughputMonitorCallback
from ._profiler import ProfilerCallback

__version__ = "0.1.0"

__all__ = [
    "STAGES",
    "PerfMonitor",
    "PerformanceProfilerCallback",
    "ProfilerCallback",
    "ThroughputMonitorCallback",
    "__version__",
    "tag_step",
]
