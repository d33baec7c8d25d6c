"""``autorun``: every DataLoader iteration of this process as a stage epoch, with no code changed.

What ``perfkit run -- python train.py`` starts in the command's processes: their start-up hook
calls ``autorun(run_dir)`` as soon as torch is imported. From then on, in this process:

* each ``iter()`` on a DataLoader (or subclass) opens a **stage epoch**, closed when the
  iterator is exhausted, at the next ``iter()`` on the same loader, or at exit; ``iter()``
  itself (worker start-up) is ``LOADER.data.iter``;
* each ``next()`` is the **data wait** (``LOADER.data.wait``), and from handing a batch out to
  the next ``next()`` (the loop body) is a **step**, as ``perfkit.window(...).iterate`` has it;
* the **stage is guessed** at each ``iter()``: ``train`` where autograd is on, ``val`` where it
  is off (``torch.no_grad()`` or ``inference_mode()`` around the loop, as evaluation loops
  have it). A loop that turns autograd off only inside its body is taken for training; a
  test set evaluated under ``no_grad`` is ``val``. A *loader* is named after the stage of its
  first ``iter()`` (``train``, then ``train2``, ... for further loaders), so two loaders of
  one stage keep their waits apart; a loader iterated while another loader's epoch of the
  same stage is open (``zip(a, b)``) has its waits timed but is no epoch of its own;
* each loader is instrumented (``instrument``, without ``time_wait``) on its first ``iter()``,
  so the records made in its workers arrive (``LOADER.data.fetch``);
* ``torch.distributed`` collectives called from Python are ``dist.wait`` (``_collectives``).

Windows go to ``run_dir`` through a ``RunWriter`` as each ends (so a process killed mid-run
leaves every finished one); at exit the open ones are closed and ``final.json`` is written.
Diagnosing is left to the ``perfkit run`` process, from what is on disk. The user's own
``section``/``@timed`` marks land in the windows (one default registry).

What is left alone: a loader someone already instrumented (the Lightning and Hugging Face
callbacks, ``perfkit.torch.instrument``: they own its stage epochs), loaders iterated off the
main thread or in a forked child, DataLoader worker processes, and ranks other than 0 of a
``torchrun`` job (no gather in zero-code mode: a collective perfkit adds could deadlock a job
whose ranks see different batch counts; rank 0's windows are rank 0's alone). A fault in this
bookkeeping is warned about once and turns it off; the script goes on.
"""

from __future__ import annotations

import atexit
import functools
import os
import threading
import weakref
from pathlib import Path
from typing import Any

import torch
from torch.utils.data import DataLoader, get_worker_info
from torch.utils.data.dataloader import _BaseDataLoaderIter

from .._iteration import record_iter, record_wait
from .._registry import Registry, current_registry
from .._state import SWITCH
from .._warn import WarnOnce
from ..resources import ResourceSampler, lease, release
from ..run import RunWriter
from ..sinks import Failures, SinkFanout
from ..stages import StageListener, StageRecorder, StageWindow, stage_metrics
from ._collectives import time_collectives
from ._dataloader import hook_iterators, instrument_dataloader, settings_of

_ATTR = "_perfkit_autorun"
SAMPLE_INTERVAL_S = 0.1
"""How often memory is sampled while a loop runs (a daemon thread)."""
_SESSION: Session | None = None
_warn = WarnOnce()


def autorun(run_dir: str | os.PathLike[str], *, registry: Registry | None = None) -> bool:
    """Time every DataLoader iteration of this process into the run directory ``run_dir`` (see the
    module docstring); False where this process is not the one to record (a rank other than 0).
    Calling it again does nothing.

    >>> import perfkit.torch
    >>> callable(perfkit.torch.autorun)
    True
    """
    global _SESSION
    if _SESSION is not None:
        return True
    if os.environ.get("RANK", "0") not in ("", "0") or get_worker_info() is not None:
        return False
    world = int(os.environ.get("WORLD_SIZE", "1") or 1)
    _SESSION = Session(Path(run_dir), registry or current_registry(), world)
    hook_iterators()  # first: ours is then the outer __next__, and times the wait for a Shipment
    _hook_loaders()
    time_collectives(_SESSION.registry)
    atexit.register(_SESSION.close)
    return True


class Loop:
    """One iteration of one loader: its stage epoch (unless ``driving`` is False), its open step."""

    __slots__ = ("batch", "done", "driving", "in_step", "name", "session", "stage")

    def __init__(self, session: Session, stage: str, name: str, driving: bool) -> None:
        self.session, self.stage, self.name, self.driving = session, stage, name, driving
        self.in_step = self.done = False
        self.batch: Any = None

    def next(self, inner: Any, it: Any) -> Any:
        """The loader's next batch: the open step ends, the wait is timed, the next step begins."""
        session = self.session
        if not session.ok or self.done:
            return inner(it)
        session.guard(self.end_step)
        try:
            batch = record_wait(functools.partial(inner, it), self.name, session.registry)
        except StopIteration:
            session.guard(session.end, self)
            raise
        if self.driving:
            session.guard(self.begin_step, batch)
        return batch

    def begin_step(self, batch: Any) -> None:
        self.session.recorder.step_begin(self.stage)
        self.in_step, self.batch = True, batch

    def end_step(self) -> None:
        if self.in_step:
            self.in_step = False
            batch, self.batch = self.batch, None
            self.session.recorder.step_end(self.stage, batch=batch)


class Session(StageListener):
    """This process's recorder, its loops and the run directory's writer (made at the first window)."""

    def __init__(self, run_dir: Path, registry: Registry, world_size: int) -> None:
        self.run_dir, self.registry, self.world_size = run_dir, registry, world_size
        self.pid = os.getpid()
        self.ok = True
        self.recorder = StageRecorder(registry, top_k_slowest=5)
        self.recorder.listeners.append(self)
        self.writer: RunWriter | None = None
        self.names: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()
        self.current: weakref.WeakKeyDictionary[Any, Loop] = weakref.WeakKeyDictionary()
        self.loops: list[Loop] = []  # open, oldest first
        self.epochs: dict[str, int] = {}
        self.windows = 0
        self.failures = Failures()
        self.sampler: ResourceSampler | None = None

    def begin(self, loader: Any) -> Loop | None:
        """``iter()`` on ``loader``: the previous iteration of it ends, a new one begins (None: not ours)."""
        if not self.ok or not SWITCH.on or os.getpid() != self.pid or get_worker_info() is not None:
            return None
        if threading.current_thread() is not threading.main_thread():
            return None
        name = self.names.get(loader)
        if name is None:
            if settings_of(getattr(loader, "collate_fn", None)) is not None:
                return None  # instrumented by someone else: its stages are theirs
            name = self._name(loader)
        previous = self.current.get(loader)
        if previous is not None:
            self.end(previous)
        if self.sampler is None:  # memory, from the first loop on (not in a process that runs none)
            self.sampler = self.recorder.sampler = lease(self.registry, SAMPLE_INTERVAL_S)
        stage = "train" if torch.is_grad_enabled() else "val"
        loop = Loop(self, stage, name, driving=not self.recorder.is_open(stage))
        if loop.driving:
            epoch = self.epochs.get(stage, 0)
            self.epochs[stage] = epoch + 1
            self.recorder.begin(stage, epoch, loader=name)
        self.current[loader] = loop
        self.loops.append(loop)
        return loop

    def _name(self, loader: Any) -> str:
        base = "train" if torch.is_grad_enabled() else "val"
        taken = set(self.names.values())
        name, n = base, 1
        while name in taken:  # train, train2, train3, ...
            n += 1
            name = f"{base}{n}"
        self.names[loader] = name
        instrument_dataloader(loader, name, registry=self.registry, time_wait=False)
        return name

    def end(self, loop: Loop) -> None:
        """``loop`` is over: its last step ends, and its stage epoch if it drove one."""
        if loop.done:
            return
        loop.done = True
        loop.end_step()
        if loop in self.loops:
            self.loops.remove(loop)
        if loop.driving:
            self.recorder.end(loop.stage)

    def stage_ended(self, window: StageWindow) -> None:
        if self.writer is None:
            meta = {"framework": "perfkit run", "rank": 0, "world_size": self.world_size}
            self.writer = RunWriter(self.run_dir, meta=meta)
        SinkFanout([self.writer], failures=self.failures).emit(window, stage_metrics(window), self.windows)
        self.windows += 1

    def close(self) -> None:
        """At exit: the open loops end (innermost first) and the run's snapshot is written."""
        if os.getpid() != self.pid or not self.ok:
            return
        for loop in reversed(list(self.loops)):
            self.guard(self.end, loop)
        if self.writer is not None:
            self.guard(self.writer.finish, self.registry.snapshot())
        if self.sampler is not None:
            self.guard(release, self.sampler)

    def guard(self, fn: Any, *args: Any) -> None:
        """``fn(*args)``; a fault turns zero-code timing off for this process, with one warning."""
        try:
            fn(*args)
        except Exception as exc:
            self.ok = False
            _warn("autorun", f"perfkit run: timing stopped ({type(exc).__name__}: {exc}); the script goes on")


def _hook_loaders() -> None:
    """``DataLoader.__iter__`` begins a loop and ``_BaseDataLoaderIter.__next__`` feeds it."""
    original_iter = DataLoader.__dict__["__iter__"]
    inner_next = _BaseDataLoaderIter.__dict__["__next__"]

    @functools.wraps(original_iter)
    def __iter__(self: Any) -> Any:
        session = _SESSION
        loop = None
        if session is not None and session.ok:
            try:
                loop = session.begin(self)
            except Exception as exc:
                session.guard(_raise, exc)
        if loop is None:
            return original_iter(self)
        it = record_iter(lambda: original_iter(self), loop.name, session.registry if session else None)
        try:
            setattr(it, _ATTR, loop)
        except Exception:  # an iterator that takes no attribute: its waits are not ours to time
            loop.session.guard(loop.session.end, loop)
        return it

    @functools.wraps(inner_next)
    def __next__(self: Any) -> Any:
        loop = self.__dict__.get(_ATTR)
        if loop is None:
            return inner_next(self)
        return loop.next(inner_next, self)

    DataLoader.__iter__ = __iter__  # type: ignore[method-assign]
    _BaseDataLoaderIter.__next__ = __next__  # type: ignore[method-assign]


def _raise(exc: BaseException) -> None:
    raise exc
