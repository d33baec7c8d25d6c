"""The sinks perfkit ships: a JSON-lines file, a W&B run, an MLflow run.

W&B and MLflow are imported when their sink is made, with an error naming the extra to
install; they log to the active run unless given one, and raise when there is none (the
fan-out in front of them warns once and goes on). Their network calls run on a ``Background``
thread, off the training thread.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType
from typing import IO, Any

from .._extras import import_extra
from ..stages import StageWindow
from ._background import Background

WANDB_STEP_KEY = "perf/window"
"""The x-axis of perfkit's W&B charts: the window counter, apart from W&B's own step."""


class JsonlSink:
    """One JSON object per window appended to ``path``: ``{"stage", "epoch", "step", "metrics"}``.

    >>> import perfkit, json, tempfile, os
    >>> from perfkit.sinks import JsonlSink
    >>> path = os.path.join(tempfile.mkdtemp(), "metrics.jsonl")
    >>> sink = JsonlSink(path)
    >>> with perfkit.window("val", epoch=0, sinks=[sink], registry=perfkit.Registry()):
    ...     pass
    >>> sink.close(); json.loads(open(path).readline())["stage"]
    'val'
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        if not isinstance(path, (str, os.PathLike)):
            raise TypeError(f"path must be a str or os.PathLike, got {path!r}")
        self.path = Path(path)
        self._file: IO[str] | None = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"JsonlSink({str(self.path)!r})"

    def emit(self, window: StageWindow, metrics: Mapping[str, float], step: int) -> None:
        line = {"stage": window.stage, "epoch": window.epoch, "step": step, "metrics": dict(metrics)}
        with self._lock:
            if self._file is None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._file = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 (kept open across windows)
            self._file.write(json.dumps(line) + "\n")
            self._file.flush()  # a killed run keeps every window written so far

    def close(self) -> None:
        """Close the file; a later ``emit`` opens it again and appends."""
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None


class _Queued:
    """A sink whose calls run on its ``Background`` thread."""

    background: Background

    def flush(self, timeout_s: float | None = None) -> bool:
        """Wait (at most ``timeout_s``, default ``flush_s``) until every window is logged."""
        return self.background.flush(timeout_s)

    def close(self) -> None:
        """Flush, within ``flush_s``; the run belongs to the caller (W&B's ends with ``wandb.finish()``)."""
        self.background.close()


class WandbSink(_Queued):
    """Log each window's metrics to the W&B run ``run`` (default: the active ``wandb.run``).

    W&B drops a ``log(..., step=s)`` whose ``s`` is below its current step, and a script that
    also calls ``wandb.log`` moves that step on every call. So the window counter is logged as
    the metric ``perf/window`` and declared the x-axis of every ``perf/*`` metric
    (``define_metric``), and each window is one ordinary ``log`` call that commits its row:
    nothing is lost whatever else the script logs, and ``run.summary`` holds the last values.
    """

    def __init__(self, run: Any = None, *, timeout_s: float = 10.0, flush_s: float = 5.0) -> None:
        self._wandb = import_extra("wandb", "wandb", "WandbSink")
        self.run = run
        self._defined_on: Any = None
        self.background = Background("WandbSink", timeout_s=timeout_s, flush_s=flush_s)

    def emit(self, window: StageWindow, metrics: Mapping[str, float], step: int) -> None:
        run = wandb_run(self._wandb, self.run, "WandbSink")  # here: no run is the caller's mistake
        self.background.submit(lambda: self._log(run, {WANDB_STEP_KEY: step, **metrics}))

    def _log(self, run: Any, row: dict[str, float]) -> None:
        if self._defined_on is not run:
            run.define_metric(WANDB_STEP_KEY)
            run.define_metric("perf/*", step_metric=WANDB_STEP_KEY)
            self._defined_on = run
        run.log(row)


class MlflowSink(_Queued):
    """Log each window's metrics to MLflow, at ``step``: to run ``run_id`` or the active run.

    ``tracking_uri`` picks the tracking server (default: MLflow's current one).
    """

    def __init__(
        self,
        run_id: str | None = None,
        tracking_uri: str | None = None,
        *,
        timeout_s: float = 10.0,
        flush_s: float = 5.0,
    ) -> None:
        for name, value in (("run_id", run_id), ("tracking_uri", tracking_uri)):
            if value is not None and (not isinstance(value, str) or not value):
                raise ValueError(f"{name} must be a non-empty str or None, got {value!r}")
        self._mlflow = import_extra("mlflow", "mlflow", "MlflowSink")
        self.run_id = run_id
        self.tracking_uri = tracking_uri
        self.background = Background("MlflowSink", timeout_s=timeout_s, flush_s=flush_s)
        self._clients: dict[str, Any] = {}

    def emit(self, window: StageWindow, metrics: Mapping[str, float], step: int) -> None:
        from mlflow.entities import Metric

        # The run and server are looked up here (MLflow's active run is per thread); the client,
        # which may open a database, and the call, which may wait on a network, go to the thread.
        run_id = mlflow_run_id(self._mlflow, self.run_id, "MlflowSink")
        uri = self.tracking_uri or self._mlflow.get_tracking_uri()
        now_ms = int(time.time() * 1000)
        batch = [Metric(k, float(v), now_ms, step) for k, v in metrics.items()]
        self.background.submit(lambda: self._client(uri).log_batch(run_id, metrics=batch))

    def _client(self, uri: str) -> Any:
        client = self._clients.get(uri)
        if client is None:
            client = self._clients[uri] = self._mlflow.MlflowClient(uri)
        return client


def wandb_run(wandb: ModuleType, run: Any, who: str) -> Any:
    """``run``, else the active W&B run; a RuntimeError when there is neither."""
    active = run if run is not None else wandb.run
    if active is None:
        raise RuntimeError(f"{who}: no W&B run: call wandb.init() first, or pass run=")
    return active


def mlflow_run_id(mlflow: ModuleType, run_id: str | None, who: str) -> str:
    """The run to log to: ``run_id``, else the active run's; a RuntimeError when there is neither."""
    if run_id is None:
        active = mlflow.active_run()
        if active is None:
            raise RuntimeError(f"{who}: no active MLflow run: call mlflow.start_run() first, or pass run_id=")
        run_id = str(active.info.run_id)
    return run_id


def mlflow_target(
    mlflow: ModuleType, run_id: str | None, tracking_uri: str | None, who: str
) -> tuple[Any, str]:
    """A client for ``tracking_uri`` and the run to log to: ``run_id``, else the active run's."""
    return mlflow.MlflowClient(tracking_uri), mlflow_run_id(mlflow, run_id, who)
