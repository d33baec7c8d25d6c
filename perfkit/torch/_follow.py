"""``follow_loaders``: every DataLoader iteration of this process as a stage epoch, with no code changed.

What ``perfkit run -- python train.py`` does in the command's processes (``perfkit.autorun`` builds
the session and hands it here). From then on, in this process:

* each ``iter()`` on a DataLoader (or subclass) opens a **stage epoch**, closed when the
  iterator is exhausted, at the next ``iter()`` on the same loader, or at exit; ``iter()``
  itself (worker start-up) is ``LOADER.data.iter``;
* each ``next()`` is the **data wait** (``LOADER.data.wait``), and from handing a batch out to
  the next ``next()`` (the loop body) is a **step**, as ``perfkit.window(...).iterate`` has it;
* the **stage is decided** at each ``iter()`` by what the script does around the loop: ``val``
  under ``torch.no_grad()`` or ``inference_mode()``, and where the last ``model.eval()`` /
  ``model.train()`` call put the model in eval mode (the Hugging Face Trainer's evaluation turns
  autograd off only inside each step, after ``model.eval()``); ``train`` after ``model.train()``
  with autograd on. Where nothing says (autograd on, no mode ever set) it is ``train``, and the
  window says it was a guess (``StageWindow.stage_guess``). A test set evaluated under
  ``no_grad`` is ``val``. A *loader* is named after the stage of its
  first ``iter()`` (``train``, then ``train2``, ... for further loaders), so two loaders of
  one stage keep their waits apart; a loader iterated while another loader's epoch of the
  same stage is open (``zip(a, b)``) has its waits timed but is no epoch of its own;
* each loader is instrumented (``instrument``, without ``time_wait``) on its first ``iter()``,
  so the records made in its workers arrive (``LOADER.data.fetch``); its settings and the CPU
  split of its waits and steps are recorded as ``perfkit.window`` records them, so the advice
  has a worker count and a gain;
* each ``torch.distributed`` collective's wait is timed in the step part it fell in (the
  session's ``time_collectives``, as under every driver).

What is left alone: a loader someone already instrumented (the Lightning and Hugging Face
callbacks, ``perfkit.torch.instrument``: they own its stage epochs), loaders iterated off the
main thread or in a forked child, and DataLoader worker processes. A fault in this bookkeeping
is warned about once and turns it off; the script goes on.
"""

from __future__ import annotations

import functools
import os
import sys
import threading
import weakref
from typing import Any, Protocol

import torch
from torch.utils.data import DataLoader, get_worker_info
from torch.utils.data.dataloader import _BaseDataLoaderIter

from .._iteration import record_iter, record_wait
from .._state import SWITCH
from .._warn import WarnOnce
from ..loaders import CpuSplit, record_settings
from ..stages import StageRecorder, StageWindow
from ._dataloader import hook_iterators, instrument_dataloader, settings_of

_ATTR = "_perfkit_autorun"
_FOLLOWER: list[LoopFollower] = []  # this process's one follower: the hooks below find it here
_warn = WarnOnce()


class LoopDriver(Protocol):
    """What the follower drives: a ``perfkit.monitor.Session``."""

    @property
    def recorder(self) -> StageRecorder: ...

    def begin(
        self, stage: str, epoch: int, *, loader: str | None = None, guess: str | None = None
    ) -> None: ...

    def end(self, stage: str) -> StageWindow | None: ...


def follow_loaders(driver: LoopDriver) -> LoopFollower:
    """Drive ``driver``'s stage epochs from every DataLoader iteration of this process (see the
    module docstring); the follower already following, if called again. Its ``close()`` ends the
    loops still open (at exit).

    >>> import perfkit.torch
    >>> callable(perfkit.torch.follow_loaders)
    True
    """
    if _FOLLOWER:
        return _FOLLOWER[0]
    follower = LoopFollower(driver)
    _FOLLOWER.append(follower)
    hook_iterators()  # first: ours is then the outer __next__, and times the wait for a Shipment
    _hook_loaders()
    _track_model_mode()
    return follower


FRAMEWORK_LOOPS = {
    ("transformers.trainer", "evaluation_loop"): "val",
    ("transformers.trainer", "prediction_loop"): "val",
    ("transformers.trainer", "_inner_training_loop"): "train",
    ("lightning.pytorch.loops.evaluation_loop", "run"): "val",
    ("lightning.pytorch.loops.prediction_loop", "run"): "predict",
    ("lightning.pytorch.loops.fit_loop", "run"): "train",
}
"""The loops of the frameworks perfkit knows, by (module, function), and the stage a loader iterated
inside one is (the Hugging Face Trainer turns autograd off only inside each evaluation step, and
sets no model mode before its next training epoch's loader starts)."""
FRAMES = 40
"""How far up the stack ``iter()`` looks for a framework's loop."""


def stage_now() -> tuple[str, str | None]:
    """The stage of a loop starting now, and what it was guessed from where nothing certain said it:
    a framework's loop around it, autograd off around it, then the model's mode."""
    frame = sys._getframe(1)
    for _ in range(FRAMES):
        if frame is None:
            break
        known = FRAMEWORK_LOOPS.get((frame.f_globals.get("__name__", ""), frame.f_code.co_name))
        if known is not None:
            return known, None
        frame = frame.f_back  # type: ignore[assignment]
    if torch.is_inference_mode_enabled() or not torch.is_grad_enabled():
        return "val", None
    if MODEL_MODE[0] is False:
        return "val", "the model was in eval mode (model.eval()) as the loop began, with autograd on"
    if MODEL_MODE[0] is None:
        return "train", "autograd is on around the loop and no model.train() or model.eval() was called"
    return "train", None


MODEL_MODE: list[bool | None] = [None]
"""The mode the last ``Module.train(mode)`` / ``eval()`` called from outside a module set (None: none yet)."""
_DEPTH = [0]


def _track_model_mode() -> None:
    """``Module.train`` notes the mode its outermost call sets (it calls itself on every child)."""
    original = torch.nn.Module.__dict__["train"]
    if hasattr(original, _ATTR):
        return

    @functools.wraps(original)
    def train(self: Any, mode: bool = True) -> Any:
        _DEPTH[0] += 1
        try:
            return original(self, mode)
        finally:
            _DEPTH[0] -= 1
            if _DEPTH[0] == 0:
                MODEL_MODE[0] = bool(mode)

    setattr(train, _ATTR, original)
    torch.nn.Module.train = train  # type: ignore[method-assign]


class Loop:
    """One iteration of one loader: its stage epoch (unless ``driving`` is False), its open step."""

    __slots__ = ("batch", "cpu", "done", "driving", "in_step", "name", "session", "stage")

    def __init__(self, session: LoopFollower, stage: str, name: str, driving: bool) -> None:
        self.session, self.stage, self.name, self.driving = session, stage, name, driving
        self.in_step = self.done = False
        self.batch: Any = None
        self.cpu = CpuSplit(name)  # what the waits and the steps cost in CPU: the advice's bounds

    def next(self, inner: Any, it: Any) -> Any:
        """The loader's next batch: the open step ends, the wait is timed, the next step begins."""
        session = self.session
        if not session.ok or self.done:
            return inner(it)
        session.guard(self.end_step)
        self.cpu.wait_started(session.registry)
        try:
            batch = record_wait(functools.partial(inner, it), self.name, session.registry)
        except StopIteration:
            session.guard(session.end, self)
            raise
        self.cpu.wait_ended(session.registry)
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


class LoopFollower:
    """This process's loops, driving a session's stage epochs (see ``follow_loaders``)."""

    def __init__(self, driver: LoopDriver) -> None:
        self.driver = driver
        self.recorder = driver.recorder
        self.registry = driver.recorder.registry
        self.pid = os.getpid()
        self.ok = True
        self.names: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()
        self.current: weakref.WeakKeyDictionary[Any, Loop] = weakref.WeakKeyDictionary()
        self.loops: list[Loop] = []  # open, oldest first
        self.epochs: dict[str, int] = {}

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
        stage, guess = stage_now()
        loop = Loop(self, stage, name, driving=not self.recorder.is_open(stage))
        if loop.driving:
            epoch = self.epochs.get(stage, 0)
            self.epochs[stage] = epoch + 1
            self.driver.begin(stage, epoch, loader=name, guess=guess)
        record_settings(self.registry, name, loader)  # in the window: what the advice is bounded by
        self.current[loader] = loop
        self.loops.append(loop)
        return loop

    def _name(self, loader: Any) -> str:
        base = stage_now()[0]
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
            self.driver.end(loop.stage)

    def close(self) -> None:
        """At exit: the open loops end, innermost first (their windows are published)."""
        if os.getpid() != self.pid or not self.ok:
            return
        for loop in reversed(list(self.loops)):
            self.guard(self.end, loop)

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
        session = _FOLLOWER[0] if _FOLLOWER else None
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
