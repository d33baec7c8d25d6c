"""Where each stage epoch's metrics go: a file, W&B, MLflow, the run directory, Lightning's loggers.

A sink is any object with ``emit(window, metrics, step)`` and ``close()``; ``SinkFanout``
sends to several and keeps one sink's failure from reaching the others or training.

    sinks = [JsonlSink("runs/exp1/metrics.jsonl"), WandbSink(), MlflowSink(), PrometheusSink(9464)]
    with perfkit.window("val", epoch=0, sinks=sinks) as w:
        ...
"""

from ._background import Background
from ._builtin import WANDB_STEP_KEY, JsonlSink, MlflowSink, WandbSink, mlflow_target, wandb_run
from ._fanout import Failures, Sink, SinkFanout, check_sinks, sink_name
from ._prometheus import PrometheusSink

__all__ = [
    "WANDB_STEP_KEY",
    "Background",
    "Failures",
    "JsonlSink",
    "MlflowSink",
    "PrometheusSink",
    "Sink",
    "SinkFanout",
    "WandbSink",
    "check_sinks",
    "mlflow_target",
    "sink_name",
    "wandb_run",
]
