"""What a session adds on a GPU (or wherever a peak is stated): FLOPs per step, its device's peak,
and the watch on synchronizing calls.

MFU needs a step's FLOPs and the device's peak. The FLOPs are the user's (``flops_per_step=``) or
counted once, on the first training step, with torch's ``FlopCounterMode``
(``perfkit.torch.count_flops``: no hand-written counting; it slows that one step, which is the
epoch's first and so its warm-up); the peak is the device table's for the dtypes the step ran in,
or the user's (``peak_tflops=``). Both go into every stage epoch's window as gauges
(``perfkit.names.FLOPS_PER_STEP``, ``PEAK_FLOPS``), so a window read back from a run directory
carries what its MFU is computed from; where either is unknown nothing is recorded and the MFU
abstains, saying why (``perfkit.resources.mfu``). ``FlopCounterMode`` imports ``torch._dynamo``
on first use (1 s on this machine's CPU, seconds more on a GPU host): the account imports it when
it is made, in the run's set-up, so the first step of the first window does not carry it.

On CUDA each step part is also timed on the device, by events where the host moves from part to
part (``perfkit.stages.DeviceParts``, made by ``parts`` for the recorder).

On CUDA the sync watch (``perfkit.torch.watch_syncs``) times where the host blocks on the device,
by call site, while a stage epoch is open: it is started by the first open stage and stopped when
the last one closes, so nothing is patched between windows or after the run. Nothing here runs
without torch, and nothing but a stated peak without CUDA.
"""

from __future__ import annotations

import contextlib
import sys
from contextlib import AbstractContextManager
from typing import Any

from .._gpu_events import torch_events
from .._peaks import Peak
from .._registry import Registry
from .._warn import WarnOnce
from ..names import FLOPS_PER_STEP, PEAK_FLOPS
from ..resources import mixed_peak
from ..stages import DeviceParts


class DeviceAccount:
    """One session's FLOPs per step, peak and sync watch (see the module docstring)."""

    def __init__(
        self, registry: Registry, *, flops_per_step: float | None, peak_tflops: float | None, watch: bool
    ) -> None:
        self.registry = registry
        self.flops = flops_per_step
        self.by_dtype: dict[str, float] = {}
        self.stated_peak = peak_tflops
        self.peak: Peak | None = None
        self._watch_wanted = watch
        self._watch: Any = None
        self._counting: tuple[AbstractContextManager[Any], Any] | None = None
        self._counted = False
        self._warn = WarnOnce()
        if flops_per_step is None and (peak_tflops is not None or self._cuda() is not None):
            try:
                import torch._dynamo  # noqa: F401  # what FlopCounterMode imports on its first use
            except Exception as exc:  # the count then fails on the first step, warned once
                self._warn("flops", f"perfkit: torch._dynamo cannot be imported ({exc!r})")

    @staticmethod
    def _cuda() -> Any:
        torch: Any = sys.modules.get("torch")
        return torch if torch is not None and torch.cuda.is_available() else None

    def parts(self) -> DeviceParts | None:
        """What times each step part on the GPU for the recorder: with the registry's own events
        (``Registry(gpu_events=...)``, the seam tests fake the device at), else ``torch.cuda.Event``
        on CUDA once the program has initialized it and while no CUDA graph is being captured; None
        without either (nothing to time)."""
        if self.registry.gpu_events is not None:
            return DeviceParts(self.registry, self.registry.gpu_events)
        torch = self._cuda()
        events = torch_events() if torch is not None else None
        if events is None:
            return None
        cuda = torch.cuda

        def ready() -> bool:  # an event recorded while a CUDA graph is captured would break the capture
            return bool(cuda.is_initialized() and not cuda.is_current_stream_capturing())

        return DeviceParts(self.registry, events, ready=ready)

    def stage_begins(self, stage: str) -> None:
        """A stage epoch begins: the watch starts (CUDA), the FLOPs are counted on training's first
        step, and the epoch's window gets the FLOPs and the peak, where known. A fault here is warned
        about once and costs the run its GPU account, never its training."""
        try:
            torch = self._cuda()
            if torch is not None and self._watch_wanted and self._watch is None:
                from ..torch import watch_syncs

                self._watch = watch_syncs(self.registry)
            uncounted = self.flops is None and not self._counted and self._counting is None
            if stage == "train" and uncounted and (torch is not None or self.stated_peak is not None):
                self._count()
            self._record()
        except Exception as exc:
            self._warn("device", f"perfkit: the GPU account stopped ({exc!r}); training goes on")

    def stage_ends(self, still_open: bool) -> None:
        """A stage epoch ended: the watch stops with the last open one (``still_open`` False)."""
        if not still_open:
            self._stop_watch()

    def _stop_watch(self) -> None:
        if self._watch is not None:
            watch, self._watch = self._watch, None
            try:
                watch.stop()
            except Exception as exc:  # a watch that cannot stop: its records are written
                self._warn("watch", f"perfkit: the sync watch did not stop cleanly ({exc!r})")

    def step_ended(self, stage: str) -> None:
        """A step ended: the first training step's FLOPs are counted now."""
        if self._counting is None or stage != "train":
            return
        context, counted = self._counting
        self._counting, self._counted = None, True
        try:
            context.__exit__(None, None, None)
        except Exception as exc:  # a model the counter cannot follow: no MFU, training goes on
            self._warn("flops", f"perfkit: counting a step's FLOPs failed ({exc!r}): no MFU")
            return
        try:
            if counted.total > 0:
                self.flops = float(counted.total)
                self.by_dtype = {k: float(v) for k, v in counted.by_dtype.items()}
                self._record()
        except Exception as exc:
            self._warn("device", f"perfkit: the GPU account stopped ({exc!r}); training goes on")

    def _count(self) -> None:
        from ..torch import count_flops

        context = count_flops()
        try:
            self._counting = (context, context.__enter__())
        except Exception as exc:
            self._counted = True
            self._warn("flops", f"perfkit: counting a step's FLOPs failed ({exc!r}): no MFU")

    def _record(self) -> None:
        if self.flops is None:
            return
        if self.peak is None and (self.by_dtype or self.stated_peak is not None):
            # FLOPs stated with no dtype and no peak: the table cannot say which dtype's peak it is
            torch = self._cuda()
            name = torch.cuda.get_device_name() if torch is not None else None
            self.peak = mixed_peak(self.by_dtype or {"fp32": self.flops}, name, peak_tflops=self.stated_peak)
        self.registry.gauge(FLOPS_PER_STEP, self.flops)
        if self.peak is not None and self.peak.tflops is not None:
            self.registry.gauge(PEAK_FLOPS, self.peak.tflops * 1e12)

    def close(self) -> None:
        """The run ended: a count still open and the watch stop."""
        if self._counting is not None:
            context, _ = self._counting
            self._counting = None
            with contextlib.suppress(Exception):  # nothing was counted: no MFU
                context.__exit__(None, None, None)
        self._stop_watch()
