"""``watch_syncs``: where the host blocks on the device, how often, and for how long.

    with perfkit.torch.watch_syncs():       # on CUDA; elsewhere it does nothing, and says why
        train()                              # sync.stall.train.py:88  count 500  total 1.9 s

A synchronizing call (``loss.item()``, ``.cpu()``, ``.tolist()``, ``if mask.any():``, a
``nonzero``, ``torch.cuda.synchronize()``) makes the host wait until the GPU has run everything
queued before it; afterwards the GPU's queue is empty and it idles until the host launches again.
Two things are needed: *where* it happens and *how long* the host waits.

Where: ``torch.cuda.set_sync_debug_mode("warn")`` makes torch warn at every synchronizing CUDA
operation it knows ("called a synchronizing CUDA operation"). torch buffers a C++ warning while
the binding runs (``PyWarningHandler``) and hands it to Python when the binding returns, so the
warning arrives just *after* the wait, attributed to the Python line that called the binding
(``filename``/``lineno``; seen on an H200 for ``item()``, ``.cpu()``, ``nonzero``). A
``warnings.showwarning`` hook takes these (a filter ``always`` in front of the user's, so each
one is seen, none is printed and ``-W error`` turns none into an exception) and passes every
other warning on.

How long: the warning cannot say (it arrives at the end). So the common synchronizing entry
points are wrapped while the watch is on: ``Tensor.item``, ``tolist``, ``cpu``, ``to``,
``__bool__``, ``__int__``, ``__float__``, ``nonzero``, ``torch.nonzero`` and
``torch.cuda.synchronize``. A wrapper reads the clock around the call and records the span only if
the debug mode reported a synchronization inside it (``torch.cuda.synchronize`` always), so a
``.to(device)`` that did not wait (pinned, ``non_blocking``) or an ``.item()`` of a CPU tensor
records nothing. The span is the host's blocked time (plus the small copy back), named by the
caller's line: ``sync.stall.FILE:LINE``. A synchronization through an entry point not wrapped
(boolean-mask indexing, ``torch.unique``, ``print(tensor)``) is still counted at its line, as
``sync.untimed.FILE:LINE`` with no duration. Frames inside torch and perfkit are skipped, so a
site is the first line of the program's own (or its framework's) code.

Cost: a wrapped call that does not synchronize pays two clock reads and a thread-local lookup
(``benchmarks/bench_syncs.py``); one that does, the warning's trip through Python's warnings
machinery and one record. Nothing is wrapped, and no mode is set, without CUDA. The watch is
process-wide (one at a time); ``stop()`` (or leaving the ``with``) puts back the methods, the
filter, ``showwarning`` and the debug mode it found. The records go to the open section of the
registry current when they are made (``registry=`` for another), so a stage epoch's window holds
its own stalls; ``perfkit.resources.stall_sites`` reads them back.
"""

from __future__ import annotations

import os
import re
import sys
import threading
import warnings
from collections.abc import Callable
from types import FrameType, ModuleType, TracebackType
from typing import Any, TextIO

from .._registry import Registry, current_registry
from .._state import SWITCH
from ..names import stall_series

SYNC_MESSAGE = "called a synchronizing CUDA operation"
"""How torch's sync debug mode begins its warning (c10/cuda/CUDAFunctions.cpp)."""

TENSOR_METHODS = ("item", "tolist", "cpu", "to", "__bool__", "__int__", "__float__", "nonzero")
"""The ``torch.Tensor`` methods a watch times; ``torch.nonzero`` and ``torch.cuda.synchronize`` too."""

_PERFKIT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_WARNINGS = ("warnings.py", "_py_warnings.py")  # the machinery between torch's warning and the hook
_LOCK = threading.Lock()
_ACTIVE: list[SyncWatch] = []


class _Depth(threading.local):
    depth = 0  # wrapped calls open in this thread
    seen = 0  # synchronizations the debug mode reported in this thread


def _is_sync_warning(message: object, category: type[Warning]) -> bool:
    return issubclass(category, UserWarning) and str(message).startswith(SYNC_MESSAGE)


class SyncWatch:
    """A process-wide watch on synchronizing calls; see the module docstring. ``torch`` is a seam
    (the module to patch; tests pass a fake one), ``registry`` None records to the current one.

    ``active`` says whether it watches; where it does not, ``reason`` says why in words.

    >>> import torch
    >>> watch = SyncWatch()
    >>> watch.start() or watch.reason if not torch.cuda.is_available() else "CUDA"
    'CUDA is not available: nothing synchronizes with a device'
    """

    def __init__(self, registry: Registry | None = None, *, torch: ModuleType | None = None) -> None:
        if registry is not None and not isinstance(registry, Registry):
            raise TypeError(f"registry must be a perfkit.Registry or None, got {registry!r}")
        self.registry = registry
        self._torch: Any = torch
        self.active = False
        self.reason = "not started"
        self._local = _Depth()
        self._saved: list[tuple[Any, str, Any, bool]] = []  # (owner, name, original, owned before)
        self._filter: Any = None
        self._showwarning: Any = None
        self._mode: Any = None
        self._files: dict[str, str] = {}  # file name -> how a site names it ("": skipped)

    def start(self) -> bool:
        """Start watching; False (with ``reason``) where there is nothing to watch or another watch runs."""
        torch: Any = self._torch or sys.modules.get("torch")
        if self.active:
            return True
        if torch is None or not torch.cuda.is_available():
            self.reason = "CUDA is not available: nothing synchronizes with a device"
            return False
        with _LOCK:
            if _ACTIVE:
                self.reason = "another SyncWatch is watching this process"
                return False
            _ACTIVE.append(self)
        self._torch = torch
        self._mode = torch.cuda.get_sync_debug_mode()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "Synchronization debug mode is a prototype feature ..."
            torch.cuda.set_sync_debug_mode("warn")
        warnings.filterwarnings("always", message=re.escape(SYNC_MESSAGE), category=UserWarning)
        self._filter = warnings.filters[0]
        self._showwarning = warnings.showwarning
        warnings.showwarning = self._hook
        for name in TENSOR_METHODS:
            self._wrap(torch.Tensor, name, explicit=False)
        self._wrap(torch, "nonzero", explicit=False)
        self._wrap(torch.cuda, "synchronize", explicit=True)
        self.active, self.reason = True, ""
        return True

    def stop(self) -> None:
        """Stop watching and put back what ``start`` changed."""
        if not self.active:
            return
        torch = self._torch
        for owner, name, original, owned in reversed(self._saved):
            if owned:
                setattr(owner, name, original)
            else:
                delattr(owner, name)  # the method was inherited (torch._C.TensorBase): uncover it
        self._saved.clear()
        filters: list[Any] = warnings.filters  # type: ignore[assignment]  # a list, typed as a Sequence
        if self._filter in filters:
            filters.remove(self._filter)
            mutated = getattr(warnings, "_filters_mutated", None)  # what filterwarnings calls after a change
            if callable(mutated):
                mutated()
        if warnings.showwarning == self._hook:
            warnings.showwarning = self._showwarning
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.cuda.set_sync_debug_mode(self._mode)
        self.active, self.reason = False, "stopped"
        with _LOCK:
            _ACTIVE.remove(self)

    def __enter__(self) -> SyncWatch:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def _wrap(self, owner: Any, name: str, *, explicit: bool) -> None:
        original = getattr(owner, name)
        owned = name in vars(owner)
        self._saved.append((owner, name, original, owned))
        setattr(owner, name, self._timed(original, explicit))

    def _timed(self, fn: Callable[..., Any], explicit: bool) -> Callable[..., Any]:
        local = self._local
        watch = self

        def synchronizing(*args: Any, **kwargs: Any) -> Any:
            depth = local.depth
            if depth or not SWITCH.on:
                return fn(*args, **kwargs)  # inside another wrapped call: the outer one times it
            reg = watch.registry or current_registry()
            seen = local.seen
            local.depth = 1
            t0 = reg.clock()
            try:
                return fn(*args, **kwargs)
            finally:
                t1 = reg.clock()
                local.depth = 0
                if explicit or local.seen != seen:
                    reg.record(stall_series(watch._site(sys._getframe(1))), t0, t1)

        synchronizing.__wrapped__ = fn  # type: ignore[attr-defined]
        return synchronizing

    def _hook(
        self,
        message: Warning | str,
        category: type[Warning],
        filename: str,
        lineno: int,
        file: TextIO | None = None,
        line: str | None = None,
    ) -> None:
        if not (self.active and _is_sync_warning(message, category)):
            self._showwarning(message, category, filename, lineno, file, line)
            return
        local = self._local
        local.seen += 1
        if local.depth == 0 and SWITCH.on:  # no wrapped call around it: counted, not timed
            reg = self.registry or current_registry()
            now = reg.clock()
            reg.record(stall_series(self._site(sys._getframe(1)), timed=False), now, now)

    def _site(self, frame: FrameType | None) -> str:
        """``file:line`` of the first frame outside torch, perfkit and the warnings machinery."""
        while frame is not None:
            filename = frame.f_code.co_filename
            short = self._files.get(filename)
            if short is None:
                short = self._files[filename] = (
                    self._short(filename) if len(self._files) < 10_000 else filename
                )
            if short:
                return f"{short}:{frame.f_lineno}"
            frame = frame.f_back
        return "unknown"

    def _short(self, filename: str) -> str:
        """How a site names ``filename``: relative to the working directory when under it; "" for a
        file of torch, perfkit or the warnings machinery, whose frames are skipped."""
        torch_dir = os.path.dirname(getattr(self._torch, "__file__", None) or _PERFKIT)
        skip = (_PERFKIT + os.sep, torch_dir + os.sep)  # not torchvision, torchmetrics: their own code
        if filename.startswith(skip) or os.path.basename(filename) in _WARNINGS:
            return ""
        try:
            rel = os.path.relpath(filename)
        except ValueError:  # another drive (Windows)
            return filename
        return filename if rel.startswith("..") else rel


def watch_syncs(registry: Registry | None = None) -> SyncWatch:
    """A started ``SyncWatch`` (use it in a ``with`` block, or call ``stop()``): each synchronizing
    call becomes a record of ``sync.stall.FILE:LINE`` (the host's blocked time) or
    ``sync.untimed.FILE:LINE``. Without CUDA it watches nothing and ``reason`` says so.

    >>> import torch, perfkit.torch
    >>> with perfkit.torch.watch_syncs() as watch:
    ...     pass
    >>> watch.active
    False
    """
    watch = SyncWatch(registry)
    watch.start()
    return watch
