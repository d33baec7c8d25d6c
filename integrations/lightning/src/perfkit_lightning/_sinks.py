"""Lightning's loggers as perfkit sinks: each logger is a sink of its own, so one that is down
(a tracking server that does not answer) is warned about once and the others still log."""

from __future__ import annotations

from collections.abc import Mapping

from lightning.pytorch.loggers import Logger

from perfkit.sinks import SinkFanout
from perfkit.stages import StageWindow


class LoggerSink:
    """Send each window's metrics to one Lightning logger, at the step the monitor chose."""

    def __init__(self, logger: Logger) -> None:
        self.logger = logger
        self.name = type(logger).__name__
        self.method = "log_metrics"  # what a warning names: the logger's call that failed

    def emit(self, window: StageWindow, metrics: Mapping[str, float], step: int) -> None:
        self.logger.log_metrics(dict(metrics), step=step)

    def close(self) -> None:
        """Nothing to release: the Trainer finalizes its loggers."""


def log_to_loggers(fanout: SinkFanout, metrics: Mapping[str, float], step: int) -> None:
    """Metrics that belong to no window (per batch) to every logger sink of ``fanout``, same policy."""
    for sink in fanout.sinks:
        if isinstance(sink, LoggerSink):
            try:
                sink.logger.log_metrics(dict(metrics), step=step)
            except Exception as exc:  # a logger that is down must not stop training
                fanout.record_failure(sink, "emit", exc)
