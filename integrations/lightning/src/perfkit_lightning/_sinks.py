"""Lightning's loggers as perfkit sinks: each logger is a sink of its own, so one that is down
(a tracking server that does not answer) is warned about once and the others still log.

A logger that talks to a network (MLflow's, W&B's) is called from a ``perfkit.sinks.Background``
thread: a window's metrics are a queue put on the training thread, whatever the server does;
at the end of a fit the queue gets a bounded time to drain, and what was lost is said.
"""

from __future__ import annotations

from collections.abc import Mapping

from lightning.pytorch.loggers import Logger, MLFlowLogger, WandbLogger

from perfkit.sinks import Background, SinkFanout
from perfkit.stages import StageWindow

NETWORK = (MLFlowLogger, WandbLogger)


class LoggerSink:
    """Send each window's metrics to one Lightning logger, at the step the monitor chose."""

    def __init__(self, logger: Logger) -> None:
        self.logger = logger
        self.name = type(logger).__name__
        self.method = "log_metrics"  # what a warning names: the logger's call that failed
        self.background = Background(self.name) if isinstance(logger, NETWORK) else None

    def emit(self, window: StageWindow, metrics: Mapping[str, float], step: int) -> None:
        self.log(metrics, step)

    def log(self, metrics: Mapping[str, float], step: int) -> None:
        """``log_metrics`` on the logger: now, or on the background thread for a network logger."""
        values = dict(metrics)
        if self.background is None:
            self.logger.log_metrics(values, step=step)
        else:
            self.background.submit(lambda: self.logger.log_metrics(values, step=step))

    def close(self) -> None:
        """Give queued metrics a bounded time to reach the server (the Trainer finalizes the logger)."""
        if self.background is not None:
            self.background.close()


def log_to_loggers(fanout: SinkFanout, metrics: Mapping[str, float], step: int) -> None:
    """Metrics that belong to no window (per batch) to every logger sink of ``fanout``, same policy."""
    for sink in fanout.sinks:
        if isinstance(sink, LoggerSink):
            try:
                sink.log(metrics, step)
            except Exception as exc:  # a logger that is down must not stop training
                fanout.record_failure(sink, "emit", exc)
