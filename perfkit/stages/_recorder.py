"""``StageRecorder``: the one owner of "where did this stage epoch's time go".

Whoever drives a training program (the Lightning integration, ``perfkit.window`` in a
script) tells the recorder when a stage epoch begins and ends, when each step begins and
ends, and how long other components' hooks took; the recorder turns that into records of
the registry (``STAGE.step``, ``STAGE.hook.OWNER``), counts samples, keeps the slowest
steps with their ``tag_step`` tags, pauses an enclosing stage while another runs inside it
(validation inside a training epoch), and at the end of each stage epoch builds its
``StageWindow``: the snapshot, the wall time, the account of every second, merged over
ranks when a ``gather`` is given. Listeners (a monitor that logs, presets that map keys,
a profiler that follows stages) receive each window: however many of them there are, each
step is recorded once.

    rec = StageRecorder(registry)
    rec.begin("val", epoch=0)
    for i, batch in enumerate(loader):          # the loader records val.data.wait
        rec.step_begin("val")
        validate(batch)
        rec.step_end("val", batch=batch)
    window = rec.end("val")
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from .._buffer import add_record, add_records
from .._context import NODES, get_cell, new_cell
from .._registry import Registry, check_registry, current_registry
from .._validate import check_int, check_number
from .._warn import WarnOnce
from ..names import HOOK, OUTSIDE, hook_series, step_part_series, step_series
from ._account import stage_account
from ._batch import batch_size
from ._device_parts import DeviceParts
from ._intervals import Cuts, Intervals
from ._merge import Merged, RankResult, Ranks, mean_account, merge, not_merged
from ._parts import StepParts
from ._segments import Segments
from ._tags import take_tags
from ._window import RankPart, SlowStep, StageWindow, keep_slowest

Gather = Callable[[Any], Sequence[Any]] | Ranks
"""Every rank's object, in rank order (a ``torch.distributed.all_gather_object``), or a ``Ranks``
transport (``perfkit.torch.gather_ranks``: the merge bounded in time and bytes); called once per
stage epoch on every rank, in the same order."""


class StageListener:
    """Receives a recorder's events; override what you need (each is called on the training thread)."""

    def stage_begun(self, stage: str, epoch: int) -> None:
        """A stage epoch began (for validation inside training: training is now paused)."""

    def step_ended(self, stage: str, index: int, duration_ns: int) -> None:
        """The ``index``-th step of the stage epoch ended; ``duration_ns`` is its own compute."""

    def stage_ended(self, window: StageWindow) -> None:
        """A stage epoch ended: its window, merged over ranks."""

    def interval_ended(self, window: StageWindow) -> None:
        """An interval (or the warm-up) of a stage epoch still running ended: its window, this
        rank's (``window.scope``, ``window.steps``; see ``perfkit.stages.Intervals``)."""

    def judge_interval(self, window: StageWindow) -> StageWindow:
        """An interval before any listener receives it: the window with this listener's verdicts
        (a monitor's provisional verdict and its changes), so that every listener, a run directory's
        among them, gets them; the window itself by default."""
        return window


def check_listeners(listeners: object) -> tuple[StageListener, ...]:
    """``listeners`` as a tuple, each a ``StageListener``; else a ``TypeError`` naming the odd one."""
    if isinstance(listeners, StageListener) or not isinstance(listeners, Iterable):
        raise TypeError(f"listeners must be a list of StageListeners, got {listeners!r}")
    out = tuple(listeners)
    for x in out:
        if not isinstance(x, StageListener):
            raise TypeError(f"listeners: {x!r} is not a perfkit.stages.StageListener")
    return out


class _Sampler(Protocol):
    """What the recorder needs of a ``perfkit.ResourceSampler``."""

    def sample_now(self) -> None: ...


@dataclass
class _Epoch:
    """One stage epoch in progress on this rank."""

    stage: str
    epoch: int
    loader: str
    window: Segments
    base: int  # the node stage records are made under
    step_node: int
    step_start: int | None = None
    excluded_ns: int = 0  # other components' hook time inside the open step
    steps: int = 0
    counted: int = 0  # steps whose batch was counted
    samples: int | None = 0
    slowest: list[tuple[int, int, dict[str, float]]] = field(default_factory=list)
    nested_s: float = 0.0
    paused_at: int = 0  # when another stage run inside it last paused it
    waited: bool = False
    cuts: Cuts | None = None  # its interval windows, when the recorder cuts them
    hook_nodes: dict[tuple[str, str], int] = field(default_factory=dict)  # (owner, kind) -> its node
    guess: str | None = None  # what the stage was guessed from, where it was
    parts: StepParts = field(default_factory=StepParts)  # the open step's parts
    part_nodes: dict[str, int] = field(default_factory=dict)  # part -> its node


class StageRecorder:
    """Stage epochs, steps and hook time of one training program, recorded once into ``registry``.

    ``top_k_slowest`` steps are kept per stage epoch with their tags; ``batch_size_fn`` counts
    the samples of a batch (default: ``perfkit.stages.batch_size``; if it raises, samples are
    no longer counted, with one warning); ``sampler`` (a ``ResourceSampler``) takes a last
    sample before each window closes, so memory peaks reach the end of the epoch; ``gather``
    merges the ranks of a distributed job (``rank`` is this process's); ``listeners`` receive
    each event, in order; ``device`` (a ``perfkit.stages.DeviceParts``, on CUDA) times each step
    part on the GPU too. All of it is given here, once: a
    session (``perfkit.monitor.Session``) builds its recorder and nothing reconfigures it afterwards.

    >>> import perfkit, numpy as np
    >>> from perfkit.stages import StageRecorder
    >>> rec = StageRecorder(perfkit.Registry())
    >>> rec.begin("val", 0)
    >>> for batch in (np.zeros((2, 8)), np.zeros((2, 8))):
    ...     rec.step_begin("val"); _ = rec.step_end("val", batch=batch)
    >>> w = rec.end("val")
    >>> w.snapshot["val.step"].count, w.samples
    (2, 4)
    """

    def __init__(
        self,
        registry: Registry | None = None,
        *,
        top_k_slowest: int = 5,
        batch_size_fn: Callable[[Any], int | None] | None = None,
        sampler: _Sampler | None = None,
        gather: Gather | None = None,
        rank: int = 0,
        listeners: Sequence[StageListener] = (),
        train_s_per_sample: float | None = None,
        device: DeviceParts | None = None,
    ) -> None:
        check_registry(registry)
        check_int(top_k_slowest, "top_k_slowest")
        if batch_size_fn is not None and not callable(batch_size_fn):
            raise TypeError(f"batch_size_fn must be callable or None, got {batch_size_fn!r}")
        if sampler is not None and not callable(getattr(sampler, "sample_now", None)):
            raise TypeError(f"sampler must have a sample_now() method, got {sampler!r}")
        if gather is not None and not callable(gather) and not isinstance(gather, Ranks):
            raise TypeError(f"gather must be callable or None, got {gather!r}")
        check_int(rank, "rank")
        if train_s_per_sample is not None:
            check_number(train_s_per_sample, "train_s_per_sample", low=0)
        self.registry = registry or current_registry()
        self.rank = rank
        self._top_k = top_k_slowest
        self._batch_size_fn = batch_size_fn
        self._sampler = sampler
        self._gather = gather
        self._listeners = check_listeners(listeners)
        self._open: dict[str, _Epoch] = {}
        self._stack: list[str] = []  # open stages, innermost last
        self.train_s_per_sample: float | None = train_s_per_sample
        """Training's time per sample in its last epoch: the other stages' reference (a framework
        that makes a recorder per call on one trainer, fit then test, passes the last one's on)."""
        self._datasets: dict[str, str] = {}
        self._count_samples = True
        self._merge_off = False  # a merge timed out: ranks are no longer merged (see ``_merge``)
        self._warn = WarnOnce()
        self._long: set[str] = set()  # stages the driver knows are long (a step-based loop)
        if device is not None and not isinstance(device, DeviceParts):
            raise TypeError(f"device must be a perfkit.stages.DeviceParts or None, got {device!r}")
        self.device = device
        """Each step part's GPU time (None: not timed)."""

    # ---- stage epochs ---------------------------------------------------------------------

    def is_open(self, stage: str) -> bool:
        """Whether a ``stage`` epoch has begun and not yet ended."""
        return stage in self._open

    @property
    def active(self) -> str | None:
        """The innermost open stage (the one running now), or None."""
        return self._stack[-1] if self._stack else None

    def begin(
        self,
        stage: str,
        epoch: int,
        *,
        loader: str | None = None,
        intervals: Intervals | None = None,
        guess: str | None = None,
    ) -> None:
        """Open a ``stage`` epoch (doing nothing if one is open); an enclosing stage is paused.

        ``loader`` names the loader series when it is not ``stage`` (a sanity check reads ``val``'s);
        ``intervals`` cuts the epoch into interval windows while it runs (None: never); ``guess``
        says what the stage was guessed from, where a driver guessed it (its window carries it).
        """
        if stage in self._open:
            return
        outer = self.active
        if outer is not None:
            self._open[outer].paused_at = self.registry.clock()  # pausing costs the outer step nothing
            self._open[outer].window.pause()
            cuts = self._open[outer].cuts
            if cuts is not None:
                cuts.window.pause()
        base = (get_cell(None) or new_cell())[0]
        self._open[stage] = _Epoch(
            stage=stage,
            epoch=epoch,
            loader=loader or stage,
            window=Segments(self.registry),
            base=base,
            step_node=NODES.child(base, step_series(stage), overlay=True),
            guess=guess,
        )
        if intervals is not None:
            self._open[stage].cuts = Cuts(
                intervals, self.registry, self.registry.clock(), stage in self._long
            )
        self._stack.append(stage)
        self._notify("stage_begun", stage, epoch)

    def end(self, stage: str) -> StageWindow | None:
        """Close the ``stage`` epoch and return its window (None if none was open); listeners get it."""
        state = self._close(stage)
        if state is None:
            return None
        try:  # the enclosing stage stays paused while this one's window is made and published
            if state.cuts is not None and state.cuts.trailing(state.steps):
                self._cut(state, state.cuts, ends_epoch=True)  # the steps after the last cut
            window = self._window(state)
            if stage == "train" and window.s_per_sample is not None:
                self.train_s_per_sample = window.s_per_sample
            self._notify("stage_ended", window)
        finally:
            self._resume_outer(state)
        return window

    def mark_long(self, stage: str) -> None:
        """``stage``'s epochs are long (a step-based loop): those with ``intervals`` are cut from the
        warm-up on, the open one included."""
        self._long.add(stage)
        state = self._open.get(stage)
        if state is not None and state.cuts is not None:
            state.cuts.on = True

    def expect_steps(self, stage: str, steps: int) -> None:
        """``stage``'s open epoch will also run ``steps`` steps (a loader's length): with ``intervals``
        set, an epoch whose pace after the warm-up projects it past ``long_after_s`` is cut from its
        first interval on, not only once it has run that long."""
        state = self._open.get(stage)
        if state is not None and state.cuts is not None:
            state.cuts.expected = (state.cuts.expected or 0) + steps

    def discard(self, stage: str) -> None:
        """Close the ``stage`` epoch without a window (a loop that turned out to have nothing to run)."""
        state = self._close(stage, sample=False)
        if state is not None:
            self._resume_outer(state)

    def _close(self, stage: str, *, sample: bool = True) -> _Epoch | None:
        state = self._open.pop(stage, None)
        if state is None:
            return None
        self._stack.remove(stage)
        if sample and self._sampler is not None:
            self._sampler.sample_now()  # the memory peak up to the very end of the window
        state.window.close()
        if state.cuts is not None:
            state.cuts.window.close()  # its last interval ends with the epoch, not after its publishing
        return state

    def _resume_outer(self, state: _Epoch) -> None:
        """Resume the stage that ``state`` ran inside: its time, and perfkit's publishing of its
        window, are the outer stage's ``nested_s``, and out of the outer step if one was open (a
        script validating in the middle of its training loop)."""
        outer = self.active
        if outer is None:
            return
        enclosing = self._open[outer]
        enclosing.nested_s += state.window.wall_s + state.nested_s
        if enclosing.step_start is not None:
            enclosing.excluded_ns += max(0, self.registry.clock() - enclosing.paused_at)
        enclosing.window.resume()
        if enclosing.cuts is not None:
            enclosing.cuts.window.resume()

    # ---- steps and hooks ------------------------------------------------------------------

    def step_begin(self, stage: str) -> None:
        """A step of ``stage`` begins now."""
        state = self._open.get(stage)
        if state is not None:
            state.step_start = self.registry.clock()
            state.excluded_ns = 0
            if self.device is not None:
                self.device.step_begins(state.steps, state.step_start)

    def step_end(self, stage: str, *, batch: Any = None, failed: bool = False) -> int | None:
        """The step of ``stage`` ends now; returns its own compute in ns (None without an open step).

        Pass ``batch`` to count its samples now, or call ``batch_done`` once the batch is known.
        """
        state = self._open.get(stage)
        if state is None or state.step_start is None:
            return None
        t0, state.step_start = state.step_start, None
        now = self.registry.clock()
        if self.device is not None:
            self.device.step_ends(stage, state.base, state.parts.current(), now)
        duration = max(0, now - t0 - state.excluded_ns)
        records = [~state.step_node if failed else state.step_node, t0, t0 + duration]
        nodes = state.part_nodes
        for part, ns in state.parts.close(now=now, step_start=t0, step_ns=duration).items():
            node = nodes.get(part)
            if node is None:
                node = nodes[part] = NODES.child(state.base, step_part_series(stage, part), overlay=True)
            records += (node, t0, t0 + ns)
        add_records(self.registry, records)  # the step and its parts: one append, one drain check
        index = state.steps
        state.steps += 1
        if self._top_k:
            keep_slowest(state.slowest, (duration, index, take_tags()), self._top_k)
        if batch is not None:
            self.batch_done(stage, batch)
        self._notify("step_ended", stage, index, duration)
        if state.cuts is not None and state.cuts.due(state.steps, self.registry.clock()):
            self._cut(state, state.cuts)
        return duration

    def part_begin(self, part: str) -> None:
        """A part of the active stage's open step (``perfkit.names.STEP_PARTS``) begins now; nothing
        without an open step. Parts nest, each second the innermost's (``perfkit.stages.StepParts``).
        Called inside the user's step, three or more times a step: no property, no helper."""
        if self._stack:
            state = self._open[self._stack[-1]]
            if state.step_start is not None:
                now = self.registry.clock()
                if self.device is not None:
                    self.device.switch(state.stage, state.base, state.parts.current(), now)
                state.parts.begin(part, now)

    def part_end(self, part: str) -> None:
        """The ``part`` of the active stage's open step ends now."""
        if self._stack:
            state = self._open[self._stack[-1]]
            if state.step_start is not None:
                now = self.registry.clock()
                if self.device is not None:
                    self.device.switch(state.stage, state.base, state.parts.current(), now)
                state.parts.end(part, now)

    def part_now(self) -> str:
        """Where a wait happening now falls: the active stage's open step's part running now
        (``StepParts.current``), ``outside`` without an open step (what ``time_collectives`` asks)."""
        stage = self.active
        state = self._open[stage] if stage is not None else None
        if state is None or state.step_start is None:
            return OUTSIDE
        return state.parts.current()

    def batch_done(self, stage: str, batch: Any) -> None:
        """Count the samples of the batch of the step that just ended (once per step)."""
        state = self._open.get(stage)
        if state is None or state.counted >= state.steps:
            return
        state.counted = state.steps
        if state.samples is None:
            return
        n = self._batch_size(batch)
        if n is None and not self._count_samples:
            state.samples = None  # counting failed: samples/s is off rather than wrong
        else:
            state.samples += n or 0  # a batch with no array in it counts nothing

    def add_samples(self, stage: str, n: int) -> None:
        """Count ``n`` more samples in the open ``stage`` epoch (batches its steps did not see)."""
        state = self._open.get(stage)
        if state is not None and state.samples is not None:
            state.samples += n

    def name_dataset(self, loader: str, dataset: str) -> None:
        """The class name of ``loader``'s dataset (``loader`` as ``val/1`` names it), where whoever
        instruments the loaders knows it: a verdict about one of several loaders names it."""
        self._datasets[loader] = dataset

    def in_step(self) -> bool:
        """Whether the active stage has a step open now."""
        stage = self.active
        return stage is not None and self._open[stage].step_start is not None

    def hook(self, owner: str, t0: int, t1: int, *, failed: bool = False, kind: str = HOOK) -> None:
        """``owner`` (another component: a callback) ran from ``t0`` to ``t1`` during the active stage.

        ``kind`` is the series infix of what ran (``perfkit.names.HOOK_KINDS``: a callback's hook,
        a checkpoint callback's, the model's own hook, a logger's method). Time inside an open
        step is taken out of the step's own compute.
        """
        stage = self.active
        if stage is None:
            return
        state = self._open[stage]
        node = state.hook_nodes.get((owner, kind))
        if node is None:  # looked up once per owner and epoch: a hook runs several times a step
            node = state.hook_nodes[owner, kind] = NODES.child(
                state.base, hook_series(stage, owner, kind), overlay=True
            )
        add_record(self.registry, node, t0, t1, failed=failed)
        if state.step_start is not None:
            state.excluded_ns += max(0, t1 - t0)
            state.parts.exclude(max(0, t1 - t0))

    def record(self, stage: str, series: str, t0: int, t1: int) -> None:
        """A span of ``stage``'s timeline measured elsewhere (building its loaders, say)."""
        state = self._open.get(stage) or (self._open.get(self.active) if self.active else None)
        base = state.base if state is not None else (get_cell(None) or new_cell())[0]
        add_record(self.registry, NODES.child(base, series, overlay=True), t0, t1, failed=False)

    # ---- windows ----------------------------------------------------------------------------

    def _window(self, state: _Epoch) -> StageWindow:
        snapshot = state.window.close()
        wall = state.window.wall_s
        step = snapshot.get(step_series(state.stage))
        mine = RankResult(
            rank=self.rank,
            snapshot=snapshot,
            wall_s=wall,
            samples=state.samples,
            slowest=tuple(
                SlowStep(state.stage, state.epoch, index, self.rank, ns / 1e9, tags)
                for ns, index, tags in sorted(state.slowest, reverse=True)
            ),
            account=stage_account(
                snapshot,
                state.stage,
                state.loader,
                wall_s=wall,
                segments=state.window.segments,
                datasets=self._datasets,
            ),
            steps=step.count if step is not None else 0,
            step_mean_s=step.mean_s if step is not None else 0.0,
        )
        done = self._merge(mine)
        ranks, merged = done.ranks, done.snapshot
        samples = [r.samples for r in ranks]
        slowest = heapq.nlargest(self._top_k, (s for r in ranks for s in r.slowest), key=_duration)
        return StageWindow(
            stage=state.stage,
            epoch=state.epoch,
            snapshot=merged,
            wall_s=max(r.wall_s for r in ranks),
            account=mean_account(ranks),
            samples=None if any(s is None for s in samples) else (sum(s or 0 for s in samples) or None),
            loader=state.loader if state.loader != state.stage else None,
            slowest=tuple(slowest),
            ranks=tuple(RankPart(r.rank, r.wall_s, r.steps, r.step_mean_s, r.account) for r in ranks)
            if len(ranks) > 1
            else (),
            nested_s=state.nested_s,
            reference_s_per_sample=None if state.stage == "train" else self._reference(),
            missing_ranks=done.missing,
            stage_guess=state.guess,
        )

    def _merge(self, mine: RankResult) -> Merged:
        """Every rank's result: through ``gather`` when it is a ``Ranks`` transport (bounded in time
        and bytes, see ``perfkit.stages._merge``), else the callable's list; this rank's alone
        without one, or once a merge has timed out."""
        assert mine.snapshot is not None
        alone = Merged(mine.snapshot, (mine,))
        if self._gather is None or self._merge_off:
            return alone
        if not isinstance(self._gather, Ranks):
            results = tuple(self._gather(mine))
            first = results[0].snapshot
            assert first is not None
            return Merged(first.merge(*(r.snapshot for r in results[1:] if r.snapshot is not None)), results)
        done = merge(mine, self._gather)
        if done is not None:
            return done
        self._merge_off = True
        missing = self._gather.missing()
        self._warn("merge", not_merged(self._gather, missing))
        return Merged(mine.snapshot, (mine,), missing=missing)

    def _cut(self, state: _Epoch, cuts: Cuts, *, ends_epoch: bool = False) -> None:
        """End the open interval of ``state`` (its steps since the last cut) and publish its window;
        the epoch goes on, or (``ends_epoch``) has just ended and this is its last interval. This
        rank's alone: no collective, so ranks never wait on each other."""
        if self._sampler is not None and not ends_epoch:  # the epoch's end has sampled already
            self._sampler.sample_now()  # the interval's memory peak up to its end
        snapshot = cuts.window.close()
        wall = cuts.window.wall_s
        samples = None
        if state.samples is not None and cuts.samples_at is not None:
            samples = state.samples - cuts.samples_at
        window = StageWindow(
            stage=state.stage,
            epoch=state.epoch,
            snapshot=snapshot,
            wall_s=wall,
            account=stage_account(
                snapshot, state.stage, state.loader, wall_s=wall, segments=cuts.window.segments
            ),
            samples=samples or None,
            loader=state.loader if state.loader != state.stage else None,
            nested_s=state.nested_s - cuts.nested_at,
            reference_s_per_sample=None if state.stage == "train" else self._reference(),
            steps=(cuts.first_step, state.steps - 1),
            ends_epoch=ends_epoch,
        )
        window = replace(window, scope=cuts.advance(state.steps, self.registry.clock()))
        cuts.samples_at, cuts.nested_at = state.samples, state.nested_s
        for listener in self._listeners:
            try:
                window = listener.judge_interval(window)
            except Exception as exc:  # a listener's fault must not stop training
                name = type(listener).__name__
                self._warn(
                    f"listener:{name}:judge_interval", f"perfkit: {name}.judge_interval failed: {exc!r}"
                )
        self._notify("interval_ended", window)

    def _reference(self) -> float | None:
        """Training's time per sample: so far in the open training epoch, else the last one's."""
        train = self._open.get("train")
        if train is not None and train.samples and train.window.wall_s > 0:
            return train.window.wall_s / train.samples
        return self.train_s_per_sample

    def steps(self, stage: str) -> int:
        """Steps recorded so far in the open ``stage`` epoch (0 when none is open)."""
        state = self._open.get(stage)
        return state.steps if state is not None else 0

    def _batch_size(self, batch: Any) -> int | None:
        if not self._count_samples:
            return None
        if self._batch_size_fn is None:
            return batch_size(batch)
        try:
            n = self._batch_size_fn(batch)
            return None if n is None else int(n)
        except Exception as exc:  # the user's function must not stop training
            self._count_samples = False
            self._warn(
                "batch_size_fn", f"perfkit: batch_size_fn raised {exc!r}; samples/s is off for this run"
            )
            return None

    def _notify(self, event: str, *args: Any) -> None:
        for listener in self._listeners:
            try:
                getattr(listener, event)(*args)
            except Exception as exc:  # a listener's fault must not stop training
                name = type(listener).__name__
                self._warn(f"listener:{name}:{event}", f"perfkit: {name}.{event} failed: {exc!r}")


def _duration(step: SlowStep) -> float:
    return step.duration_s
