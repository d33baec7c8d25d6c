"""``Session``: one monitored run, assembled once, whatever drives it (see ``perfkit.monitor``).

The resource sampler is leased at the first stage epoch and given back at the end; the run
directory's writer is made on the publishing rank when the first window needs it. Listeners (a
Lightning preset, a profiler following the stages) are the session's: each gets every event,
and a fault in one is warned about once and keeps no other from its event.

>>> import perfkit, numpy as np
>>> session = Session(Options(registry=perfkit.Registry(), console=False, sample_resources=False))
>>> session.begin("val", 0)
>>> for batch in (np.zeros((2, 8)), np.zeros((2, 8))):
...     session.recorder.step_begin("val"); _ = session.recorder.step_end("val", batch=batch)
>>> _ = session.end("val")
>>> session.monitor.last_metrics["val"]["perf/val/samples"]
4.0
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._registry import Registry, current_registry
from .._warn import WarnOnce, warn
from ..findings import Diagnosis
from ..resources import ResourceSampler, lease, release
from ..run import RunWriter
from ..sinks import Sink
from ..stages import Gather, Intervals, StageListener, StageRecorder, StageWindow, check_listeners
from ._console import console_logger, say_through
from ._device import DeviceAccount
from ._monitor import Say, StageMonitor
from ._options import Options

_log = logging.getLogger("perfkit.run")


def say_in_script(text: str) -> None:
    """How a session with no framework logs a block: ``perfkit.run``'s logger where logging is
    configured, else a console logger of perfkit's own."""
    say_through(_log, console_logger("perfkit.run.console"), text)


@dataclass(frozen=True)
class Host:
    """What the framework driving a session gives it.

    ``say`` logs a block (through ``logging``, clear of progress bars); ``rank`` is this process's
    and ``world`` the number of ranks: above one, each stage epoch's window is merged over the
    ranks at its end (through ``gather``, else a ``perfkit.torch.TorchRanks`` bounded by the
    options' ``merge_timeout_s``), and only rank 0 publishes. ``run_path`` is where the run
    directory goes when the options name none (None: nowhere); ``meta`` is its ``run.json``
    metadata. ``sinks`` are the framework's own (its loggers), given each window before the
    options' sinks; ``step_of(stage)`` / ``interval_step_of(stage)`` the step a window's or an
    interval's metrics are logged at (None: a count of windows published).
    """

    say: Say = say_in_script
    rank: int = 0
    world: int = 1
    gather: Gather | None = None
    run_path: Path | None = None
    meta: Mapping[str, Any] = field(default_factory=dict)
    sinks: Sequence[Sink] = ()
    step_of: Callable[[str], int] | None = None
    interval_step_of: Callable[[str], int] | None = None


class Session(StageListener):
    """One monitored run (see the module docstring).

    ``listeners`` follow the stage timeline beside the monitor (more join with ``add_listener``);
    ``monitor=False`` publishes nothing of the session's own (a Lightning fit with presets only:
    they publish their keys themselves); ``writer`` is a run directory the caller made (a
    script's ``run=``), used in place of one made from ``run_dir``; ``train_s_per_sample`` is
    training's time per sample carried from an earlier run of the same trainer (the other stages'
    reference).
    """

    def __init__(
        self,
        options: Options | None = None,
        host: Host | None = None,
        *,
        listeners: Sequence[StageListener] = (),
        monitor: bool = True,
        writer: RunWriter | None = None,
        train_s_per_sample: float | None = None,
    ) -> None:
        if options is not None and not isinstance(options, Options):
            raise TypeError(f"options must be a perfkit.monitor.Options or None, got {options!r}")
        if host is not None and not isinstance(host, Host):
            raise TypeError(f"host must be a perfkit.monitor.Host or None, got {host!r}")
        if writer is not None and not isinstance(writer, RunWriter):
            raise TypeError(f"writer must be a perfkit.run.RunWriter or None, got {writer!r}")
        self.options = options = options or Options()
        self.host = host = host or Host()
        self.registry: Registry = options.registry or current_registry()
        self.publish = host.rank == 0
        """Whether this process publishes (sends metrics, says blocks, writes the run directory)."""
        self._listeners = list(check_listeners(listeners))
        self._warn = WarnOnce()
        self._plan = options.intervals_plan()
        self._writers: dict[Path, RunWriter] = {}
        self._run_path: Path | None = None
        if writer is not None:
            self._run_path = writer.path
            self._writers[writer.path] = writer
        elif options.save_run:
            self._run_path = Path(options.run_dir) if options.run_dir is not None else host.run_path
        self._sampler: ResourceSampler | None = None
        self._stop_parts: Callable[[], None] | None = None
        self._device = DeviceAccount(
            self.registry,
            flops_per_step=options.flops_per_step,
            peak_tflops=options.peak_tflops,
            watch=options.watch_syncs,
        )
        self.monitor: StageMonitor | None = None
        """The session's publisher (None with ``monitor=False``)."""
        if monitor:
            self.monitor = StageMonitor(
                say=host.say,
                stages=options.stages,
                sinks=[*host.sinks, _RunSink(self), *options.sinks],
                prefix=options.prefix,
                user_series=options.user_series,
                console=options.console,
                publish=self.publish,
                step_of=host.step_of,
                is_open=lambda stage: self.recorder.is_open(stage),
                interval_step_of=host.interval_step_of,
            )
        self.recorder = StageRecorder(
            self.registry,
            top_k_slowest=options.top_k_slowest,
            batch_size_fn=options.batch_size_fn,
            sampler=self,
            gather=self._transport(),
            rank=host.rank,
            listeners=(self,),
            train_s_per_sample=train_s_per_sample,
            device=self._device.parts(),
        )

    # ---- the run ------------------------------------------------------------------------------

    def begin(
        self,
        stage: str,
        epoch: int,
        *,
        loader: str | None = None,
        intervals: Intervals | None = None,
        guess: str | None = None,
    ) -> None:
        """Open a ``stage`` epoch (``StageRecorder.begin``), cut into intervals by the options' plan
        (or ``intervals``); the first one starts the resource sampler. Where torch is in use, the
        timing of each step's backward, optimizer step and zero_grad, and where ``torch.distributed``
        is, of each collective's wait (``perfkit.torch.time_collectives``), runs while a stage epoch
        is open: torch is patched only then, never between windows or after the run."""
        if self._sampler is None and self.options.sample_resources:
            self._sampler = lease(self.registry, self.options.sample_interval_s)
        if self._stop_parts is None and "torch" in sys.modules:
            from ..torch import time_collectives, time_step_parts

            stops = [time_step_parts(self.recorder)]
            if "torch.distributed" in sys.modules:
                stops.append(time_collectives(self.recorder))

            def stop_both() -> None:
                for stop in stops:
                    stop()

            self._stop_parts = stop_both
        self.recorder.begin(stage, epoch, loader=loader, intervals=intervals or self._plan, guess=guess)
        self._device.stage_begins(stage)  # in the window: its FLOPs and peak, where known

    def end(self, stage: str) -> StageWindow | None:
        """Close the ``stage`` epoch; its window, published, or None when none was open."""
        return self.recorder.end(stage)

    def sample_now(self) -> None:
        """A last memory sample as a window closes (the recorder asks), while the sampler runs."""
        if self._sampler is not None:
            self._sampler.sample_now()

    def run_writer(self, path: Path | None = None) -> RunWriter | None:
        """The run directory's writer (``path``: another run directory, for a member's own), made
        on first use; None off the publishing rank or where no run directory is kept."""
        path = path or self._run_path
        if path is None or not self.publish:
            return None
        writer = self._writers.get(path)
        if writer is None:
            writer = self._writers[path] = RunWriter(path, meta=self.host.meta, prefix=self.options.prefix)
        return writer

    @property
    def run_path(self) -> Path | None:
        """Where the run directory is (None: none is kept)."""
        return self._run_path

    def finish(self, *, diagnose: bool = True) -> Diagnosis | None:
        """The run ended: the held blocks said, the run's snapshot written and, with ``diagnose``,
        its ``verdicts.json`` and ranked verdicts said (``perfkit run`` diagnoses in its own
        process). A run that published no window writes no run directory."""
        try:
            published = self.monitor is not None and bool(self.monitor.last_metrics)
            writer = self.run_writer() if self._writers or published else None
            snapshot = self.registry.snapshot()
            if self.monitor is not None and diagnose:
                return self.monitor.finish(writer, snapshot)
            if self.monitor is not None:
                self.monitor.flush()
            if writer is not None:
                writer.finish(snapshot)
            return None
        finally:
            self.close()

    def close(self) -> None:
        """Give the resource sampler back and stop timing step parts and collectives (also where a
        run ends without ``finish``: an interrupted fit)."""
        if self._sampler is not None:
            sampler, self._sampler = self._sampler, None
            release(sampler)
        self._stop_torch()
        self._device.close()

    def _stop_torch(self) -> None:
        if self._stop_parts is not None:
            stop, self._stop_parts = self._stop_parts, None
            stop()

    # ---- listeners ----------------------------------------------------------------------------

    def add_listener(self, listener: StageListener) -> None:
        """``listener`` follows the stage timeline from now on (once, however often it is added)."""
        (checked,) = check_listeners([listener])
        if checked not in self._listeners:
            self._listeners.append(checked)

    def remove_listener(self, listener: StageListener) -> None:
        """``listener`` no longer follows the stage timeline."""
        if listener in self._listeners:
            self._listeners.remove(listener)

    def stage_begun(self, stage: str, epoch: int) -> None:
        self._each("stage_begun", stage, epoch)

    def step_ended(self, stage: str, index: int, duration_ns: int) -> None:
        if index == 0:
            self._device.step_ended(stage)  # the first training step's FLOPs were being counted
        self._each("step_ended", stage, index, duration_ns)

    def stage_ended(self, window: StageWindow) -> None:
        if self.recorder.active is None:  # the last open stage: torch is unpatched until the next
            self._stop_torch()
        self._device.stage_ends(still_open=self.recorder.active is not None)
        self._each("stage_ended", window)

    def interval_ended(self, window: StageWindow) -> None:
        self._each("interval_ended", window)

    def judge_interval(self, window: StageWindow) -> StageWindow:
        """The interval as every listener judged it (the monitor's provisional verdict and CHANGE),
        before any receives it."""
        for listener in [*([self.monitor] if self.monitor is not None else []), *self._listeners]:
            try:
                window = listener.judge_interval(window)
            except Exception as exc:  # a listener's fault must not stop training, nor the others
                name = type(listener).__name__
                self._warn(
                    f"listener:{name}:judge_interval", f"perfkit: {name}.judge_interval failed: {exc!r}"
                )
        return window

    def _each(self, event: str, *args: Any) -> None:
        targets = [*([self.monitor] if self.monitor is not None else []), *self._listeners]
        for listener in targets:
            try:
                getattr(listener, event)(*args)
            except Exception as exc:  # a listener's fault must not stop training, nor the others
                name = type(listener).__name__
                self._warn(f"listener:{name}:{event}", f"perfkit: {name}.{event} failed: {exc!r}")

    # ---- ranks --------------------------------------------------------------------------------

    def _transport(self) -> Gather | None:
        """How the ranks are merged: the host's own, else torch.distributed's bounded transport
        where there are several ranks (torch is imported only then)."""
        if self.host.gather is not None or self.host.world <= 1:
            return self.host.gather
        from ..torch import TorchRanks

        return TorchRanks(timeout_s=self.options.merge_timeout_s)

    def time_gradient_sync(self, model: Any) -> None:
        """Time each rank's wait for DDP's gradient all-reduce on ``model`` where the options ask
        and ``model`` is a ``DistributedDataParallel`` (``perfkit.torch.time_gradient_sync``); a
        communication hook of the user's own is kept, and said once."""
        if not self.options.time_gradient_sync:
            return
        from torch.nn.parallel import DistributedDataParallel

        from ..torch import time_gradient_sync

        if not isinstance(model, DistributedDataParallel):
            return
        try:
            time_gradient_sync(model, registry=self.registry)
        except RuntimeError as exc:  # DDP takes one hook: the user's (PowerSGD, compression) stays
            if self.publish:
                warn(
                    "perfkit: the DDP model already has a communication hook, kept as it is; each rank's "
                    "wait for the gradient all-reduce is not timed, so a rank with slow compute is not "
                    f"told from the ranks that wait for it (time_gradient_sync=False says nothing): {exc}"
                )


class _RunSink:
    """The run directory as one of the monitor's sinks: its writer is made at the first window."""

    name = "RunWriter"

    def __init__(self, session: Session) -> None:
        self.session = session

    def emit(self, window: StageWindow, metrics: Mapping[str, float], step: int) -> None:
        writer = self.session.run_writer()
        if writer is not None:
            writer.emit(window, metrics, step)

    def close(self) -> None:
        """The writer is the session's: ``finish`` completes it."""
