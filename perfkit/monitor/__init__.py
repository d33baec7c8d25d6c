"""What a training framework's adapter needs to report a run: one listener, framework-free.

    monitor = StageMonitor(say=logging.getLogger("perfkit").info, sinks=[RunWriter("runs/exp1")])
    recorder.listeners.append(monitor)        # each stage epoch: metrics to every sink, a console block
    ...
    monitor.finish("runs/exp1", registry.snapshot())   # verdicts.json, the run's ranked verdicts

The Lightning callback (``perfkit_lightning.PerfMonitor``) and the Hugging Face callback
(``perfkit_hf.PerfkitCallback``) are thin adapters over it: they drive a ``StageRecorder`` from
their framework's hooks and hand ``StageMonitor`` a way to log and the step to log at.
"""

from ._console import console_logger, say_through
from ._monitor import Say, StageMonitor

__all__ = ["Say", "StageMonitor", "console_logger", "say_through"]
