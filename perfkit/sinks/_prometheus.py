"""``PrometheusSink``: each window's merged metrics and every rank's own figures as Prometheus gauges.

A cluster's monitoring scrapes one endpoint (rank 0's: only rank 0 sends) or reads a text file
(node exporter's textfile collector), and takes max or min over ranks and alerts itself. Every
metric is named after its perfkit key without the stage, which becomes a label
(``perf/train/time/data_wait_fraction`` -> ``perfkit_time_data_wait_fraction{stage="train"}``);
each rank's account of the epoch is ``perfkit_rank_seconds{stage, rank, part}``, with its wall
time and mean step, and ``perfkit_ranks_missing{stage}`` counts the ranks that did not answer the
merge. Setting a gauge is a local call: nothing here waits on the network.

    >>> import perfkit
    >>> from perfkit.sinks import PrometheusSink
    >>> sink = PrometheusSink()
    >>> with perfkit.window("val", epoch=0, sinks=[sink], registry=perfkit.Registry()):
    ...     pass
    >>> sink.registry.get_sample_value("perfkit_epoch", {"stage": "val", "scope": "epoch"})
    0.0
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .._extras import import_extra
from .._validate import check_int
from ..names import ACCOUNT_PARTS
from ..stages import StageWindow

_UNSAFE = re.compile(r"[^a-zA-Z0-9_]")


class PrometheusSink:
    """Gauges in ``registry`` (default: a registry of its own), served on ``port`` (at ``addr``)
    and/or written to ``textfile`` after each window; neither: the caller serves ``registry``."""

    def __init__(
        self,
        port: int | None = None,
        *,
        addr: str = "0.0.0.0",
        textfile: str | os.PathLike[str] | None = None,
        registry: Any = None,
    ) -> None:
        prometheus = import_extra("prometheus_client", "prometheus", "PrometheusSink")
        if port is not None:
            check_int(port, "port", high=65535)
        if textfile is not None and not isinstance(textfile, (str, os.PathLike)):
            raise TypeError(f"textfile must be a str, os.PathLike or None, got {textfile!r}")
        self._prometheus = prometheus
        self.registry = registry if registry is not None else prometheus.CollectorRegistry()
        self.textfile = Path(textfile) if textfile is not None else None
        self._gauges: dict[str, Any] = {}
        self.server: Any = None
        if port is not None:  # a daemon thread of prometheus_client's own
            self.server = prometheus.start_http_server(port, addr=addr, registry=self.registry)

    def __repr__(self) -> str:
        where = [f"port={self.server[0].server_port}"] if self.server else []
        where += [f"textfile={str(self.textfile)!r}"] if self.textfile else []
        return f"PrometheusSink({', '.join(where)})"

    def emit(self, window: StageWindow, metrics: Mapping[str, float], step: int) -> None:
        stage = {"stage": window.stage, "scope": window.scope}
        self._gauge("perfkit_epoch", ("stage", "scope")).labels(**stage).set(window.epoch)
        for key, value in metrics.items():
            self._gauge(_name(key, window.stage), ("stage", "scope")).labels(**stage).set(value)
        if window.ranks:
            parts = self._gauge("perfkit_rank_seconds", ("stage", "rank", "part"))
            walls = self._gauge("perfkit_rank_wall_seconds", ("stage", "rank"))
            steps = self._gauge("perfkit_rank_step_mean_seconds", ("stage", "rank"))
            for r in window.ranks:
                rank = {"stage": window.stage, "rank": str(r.rank)}
                walls.labels(**rank).set(r.wall_s)
                steps.labels(**rank).set(r.step_mean_s)
                for part in ACCOUNT_PARTS:
                    parts.labels(**rank, part=part).set(r.account.seconds(part))
        if not window.is_interval:
            missing = self._gauge("perfkit_ranks_missing", ("stage",))
            missing.labels(stage=window.stage).set(len(window.missing_ranks))
        if self.textfile is not None:  # written whole, then renamed: a scrape never reads half
            self.textfile.parent.mkdir(parents=True, exist_ok=True)
            self._prometheus.write_to_textfile(str(self.textfile), self.registry)

    def close(self) -> None:
        """Stop serving (the gauges keep their last values in ``registry``)."""
        if self.server is not None:
            server, thread = self.server
            server.shutdown()
            thread.join(timeout=5)
            self.server = None

    def _gauge(self, name: str, labels: tuple[str, ...]) -> Any:
        gauge = self._gauges.get(name)
        if gauge is None:
            gauge = self._prometheus.Gauge(name, f"perfkit: {name}", labels, registry=self.registry)
            self._gauges[name] = gauge
        return gauge


def _name(key: str, stage: str) -> str:
    """``perf/train/time/data_wait_fraction`` -> ``perfkit_time_data_wait_fraction`` (the stage is a label).

    >>> _name("perf/interval/train/steps", "train")
    'perfkit_interval_steps'
    """
    parts = key.split("/")
    if stage in parts[1:]:
        parts.remove(stage)
    return "perfkit_" + _UNSAFE.sub("_", "_".join(parts[1:]))
