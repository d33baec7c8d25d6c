"""The account of a stage epoch: its wall time split into exclusive parts that add up to it.

================  ====================================================================
``data_wait``     waiting for the loader: ``iter()`` (worker start-up) and every ``next()``
``step``          the step (other components' hooks inside it taken out; under DDP, with the
                  rank's wait for the others: the overlay ``sync_wait``)
``callbacks``     other components' hooks during the stage (Lightning callbacks), by owner
``module_hooks``  the model's own hooks run outside a step (a LightningModule's), by hook
``loggers``       the loggers' methods (``log_metrics``, ``save``), by logger and method
``loader_setup``  building loaders (a framework asking the user's code for them), by stage
``other``         the rest: the framework's own loop, what no timer covers
================  ====================================================================

``other`` is what is left, shown and never hidden; its subjects say when in the epoch it
happened (``residual_zones``). Where measured parts overlap (a step that pulls its own batches
from the loader), they can add up to more than the wall time: ``other`` is then 0 and
``overlap_s`` says by how much.

An *overlay* is a measured piece of one part, not a part of its own (the parts still add up to
the wall time):

===================  ====================================================================
``sync_wait``        inside ``step``: the rank's wait for DDP's gradient all-reduce past its own
                     backward (``dist.grad_wait``, ``perfkit.torch.time_gradient_sync``)
``collective_wait``  inside ``step``: the rank's exposed waits in every other collective
                     (FSDP's all-gathers and reduce-scatters, a script's all-reduce:
                     ``perfkit.torch.time_collectives``), by step part and by collective in the
                     subjects (``perfkit.stages._collective_account``)
===================  ====================================================================

An overlay rather than a part carved out of ``step``: a waiting rank is still in its step (the
step time every other rule and report reads stays the truth of its loop), and a run without
collectives keeps the account it always had. ``step`` less both waits is the rank's own compute
(``Account.compute_s``): what tells a slow rank from the ranks that wait for it.

>>> import perfkit
>>> reg = perfkit.Registry()
>>> t = reg.clock()
>>> reg.record("val.data.wait", t, t + 30_000_000); reg.record("val.step", t, t + 60_000_000)
>>> a = stage_account(reg.snapshot(), "val", "val", wall_s=0.1)
>>> round(a.fraction("data_wait"), 2), round(a.fraction("step"), 2), round(a.fraction("other"), 2)
(0.3, 0.6, 0.1)
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from .._snapshot import Snapshot
from ..names import (
    ACCOUNT_OVERLAYS,
    ACCOUNT_PARTS,
    CALLBACKS,
    CHECKPOINT,
    COLLECTIVE_WAIT,
    GRAD_WAIT,
    HOOK_KINDS,
    LOADER_SETUP,
    LOGGERS,
    MODULE_HOOKS,
    REST,
    STEP_GPU,
    STEP_PART,
    STEP_PARTS,
    SYNC_WAIT,
    WAIT_PARTS,
    WORKER_WAIT,
    end_series,
    fetch_series,
    gpu_series,
    iter_series,
    stage_loaders,
    step_part_series,
    step_series,
    wait_part_series,
    wait_series,
)
from ._collective_account import collective_subjects, in_steps

PARTS = ACCOUNT_PARTS
"""The parts of an account, in the order a report stacks them (``perfkit.names``)."""


@dataclass(frozen=True)
class Account:
    """Seconds per part (``PARTS``) of ``wall_s``, and per subject within a part.

    Subjects: ``data_wait`` -> ``iter``, ``first_batch``, ``batches``, ``end`` (the loader's last
    call); ``step`` -> its parts, ``forward``, ``backward``, ``optimizer``, ``zero_grad`` and
    ``rest`` (what none claims), adding up to the step, where parts were recorded; ``callbacks`` -> each
    callback's name, but a checkpoint callback's, which is under ``checkpoint`` (its seconds are in
    the ``callbacks`` part); ``module_hooks`` -> each hook of the model; ``loggers`` ->
    ``CLASS.METHOD``; ``loader_setup`` -> each stage whose loaders were built; ``stalled_on`` ->
    the worker-side stages the loop's waits were waiting for (see ``stalls``); ``wait_sections``
    -> the user's sections run inside the waits in this process (see ``wait_sections``);
    ``other`` -> when the unmeasured time happened (see ``residual_zones``).
    ``first_batch_extra_s``: how much longer each start's first batch took than that start's
    other batches (None where it was not measured: an account built by hand).

    ``loaders``: where the stage iterated several loaders (``val``, ``val/1``: Lightning's
    ``dataloader_idx``, a script's second loop), each one's own account against the same wall
    time: its ``data_wait`` (with that part's subjects, ``stalled_on`` and ``wait_sections``),
    the ``step`` of its batches, its ``dataset`` (the class name, where known). The stage's
    parts are their sums. Empty for a stage with one loader.

    ``overlays``: seconds measured inside one part (``perfkit.names.ACCOUNT_OVERLAYS``), not adding to
    the wall time: ``sync_wait``, the part of ``step`` spent waiting for the other ranks in DDP's
    gradient all-reduce; ``collective_wait``, the part held by the other collectives (their
    subjects: ``collective_wait`` by step part, ``collectives`` by collective, ``collective_bytes``,
    ``collective_calls``). Absent where it was not measured (not the same as 0: no wait).
    """

    wall_s: float
    parts: Mapping[str, float]
    subjects: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    overlap_s: float = 0.0
    first_batch_extra_s: float | None = None
    loaders: Mapping[str, Account] = field(default_factory=dict)
    dataset: str | None = None
    overlays: Mapping[str, float] = field(default_factory=dict)

    def seconds(self, part: str) -> float:
        """Seconds of ``part`` (0 for a part with nothing measured)."""
        return self.parts.get(part, 0.0)

    def fraction(self, part: str) -> float:
        """Share of the wall time spent in ``part`` (0 for an empty window)."""
        return self.seconds(part) / self.wall_s if self.wall_s > 0 else 0.0

    def compute_s(self) -> float | None:
        """The step's own compute: ``step`` less its ``sync_wait`` and ``collective_wait`` (None where
        neither wait was measured).

        >>> Account(1.0, {"step": 0.8}, overlays={"sync_wait": 0.3}).compute_s()
        0.5
        """
        waits = [self.overlays[k] for k in (SYNC_WAIT, COLLECTIVE_WAIT) if k in self.overlays]
        return None if not waits else max(0.0, self.seconds(STEP_PART) - sum(waits))

    @staticmethod
    def empty(wall_s: float) -> Account:
        """An account with nothing measured: all of ``wall_s`` is ``other``."""
        return Account(wall_s, {p: (wall_s if p == "other" else 0.0) for p in PARTS})

    @staticmethod
    def mean(accounts: Iterable[Account]) -> Account:
        """The mean over ranks, part by part: each rank's seconds against its own wall time."""
        items = list(accounts)
        n = len(items) or 1
        subjects: dict[str, dict[str, float]] = {}
        for a in items:
            for part, subs in a.subjects.items():
                mine = subjects.setdefault(part, {})
                for name, s in subs.items():
                    mine[name] = mine.get(name, 0.0) + s / n
        return Account(
            wall_s=sum(a.wall_s for a in items) / n,
            parts={p: sum(a.seconds(p) for a in items) / n for p in PARTS},
            subjects=subjects,
            overlap_s=sum(a.overlap_s for a in items) / n,
            first_batch_extra_s=(
                None
                if any(a.first_batch_extra_s is None for a in items)
                else sum(a.first_batch_extra_s or 0.0 for a in items) / n
            ),
            loaders={
                name: Account.mean(a.loaders[name] for a in items if name in a.loaders)
                for name in dict.fromkeys(name for a in items for name in a.loaders)
            },
            dataset=next((a.dataset for a in items if a.dataset), None),
            # a mean only where every rank measured it: a rank without the figure is not a rank at 0
            overlays={
                k: sum(a.overlays[k] for a in items) / n
                for k in ACCOUNT_OVERLAYS
                if items and all(k in a.overlays for a in items)
            },
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "wall_s": self.wall_s,
            "parts": dict(self.parts),
            "subjects": {k: dict(v) for k, v in self.subjects.items()},
            "overlap_s": self.overlap_s,
            "first_batch_extra_s": self.first_batch_extra_s,
        }
        if self.loaders:
            out["loaders"] = {name: a.to_dict() for name, a in self.loaders.items()}
        if self.dataset is not None:
            out["dataset"] = self.dataset
        if self.overlays:
            out["overlays"] = dict(self.overlays)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Account:
        return cls(
            wall_s=float(data["wall_s"]),
            parts={str(k): float(v) for k, v in dict(data["parts"]).items()},
            subjects={
                str(k): {str(n): float(s) for n, s in dict(v).items()}
                for k, v in dict(data.get("subjects") or {}).items()
            },
            overlap_s=float(data.get("overlap_s") or 0.0),
            first_batch_extra_s=(
                None if data.get("first_batch_extra_s") is None else float(data["first_batch_extra_s"])
            ),
            loaders={str(k): cls.from_dict(v) for k, v in dict(data.get("loaders") or {}).items()},
            dataset=data["dataset"] if isinstance(data.get("dataset"), str) else None,
            overlays={str(k): float(v) for k, v in dict(data.get("overlays") or {}).items()},
        )


def stage_account(
    snapshot: Snapshot,
    stage: str,
    loader: str,
    *,
    wall_s: float,
    segments: Sequence[tuple[int, int]] | None = None,
    datasets: Mapping[str, str] | None = None,
) -> Account:
    """The account of one stage epoch on one rank, from the records of its window.

    ``segments`` are the stretches (ns) the window was open (a training epoch paused around its
    validation); default: the snapshot's own span. ``loader`` names the stage's loader; where
    the stage iterated several (``loader``, ``loader/1``, ...: ``perfkit.names.loader_name``),
    each gets its own account in ``Account.loaders``, with its dataset's class from ``datasets``
    (by loader name), and the stage's data wait is their sum.
    """
    names = stage_loaders(snapshot, loader)
    own = {name: _loader_account(snapshot, name, wall_s) for name in names}
    hooks = {kind: _hooks(snapshot, stage + infix) for kind, infix in HOOK_KINDS.items()}
    setups = {n[: -len(LOADER_SETUP)]: snapshot[n].total_s for n in snapshot if n.endswith(LOADER_SETUP)}
    parts = {
        "data_wait": sum(a.seconds("data_wait") for a in own.values()),
        "step": _total(snapshot, step_series(stage)),
        CALLBACKS: sum(hooks[CALLBACKS].values()) + sum(hooks[CHECKPOINT].values()),
        MODULE_HOOKS: sum(hooks[MODULE_HOOKS].values()),
        LOGGERS: sum(hooks[LOGGERS].values()),
        "loader_setup": sum(setups.values()),
    }
    named = sum(parts.values())
    parts["other"] = max(0.0, wall_s - named)
    spans = [(snapshot.start_ns, snapshot.end_ns)] if segments is None else list(segments)
    subjects = {
        **{key: _summed(a.subjects.get(key, {}) for a in own.values()) for key in _LOADER_SUBJECTS},
        **hooks,
        "loader_setup": setups,
        "other": residual_zones(snapshot, stage, names, spans, parts["other"]),
        **({STEP_PART: step_parts} if (step_parts := _step_parts(snapshot, stage, parts["step"])) else {}),
        **({STEP_GPU: on_gpu} if (on_gpu := _step_gpu(snapshot, stage)) else {}),
        **collective_subjects(snapshot),
    }
    overlays: dict[str, float] = {}
    if GRAD_WAIT in snapshot:
        overlays[SYNC_WAIT] = _total(snapshot, GRAD_WAIT)
    if (waited := in_steps(subjects)) is not None:
        overlays[COLLECTIVE_WAIT] = waited
    loaders: dict[str, Account] = {}
    if len(names) > 1:
        steps = _steps_by_loader(snapshot, stage, names)
        datasets = datasets or {}
        for name, a in own.items():
            loaders[name] = replace(
                a, parts={**a.parts, "step": steps.get(name, 0.0)}, dataset=datasets.get(name)
            )
    return Account(
        wall_s,
        parts,
        subjects,
        overlap_s=max(0.0, named - wall_s),
        first_batch_extra_s=sum(a.first_batch_extra_s or 0.0 for a in own.values()),
        loaders=loaders,
        # the waits are inside the steps: never more than they took (a record of a step cut off at
        # the window's edge)
        overlays={k: min(seconds, parts["step"]) for k, seconds in overlays.items()},
    )


def _step_parts(snapshot: Snapshot, stage: str, step_s: float) -> dict[str, float]:
    """The step's parts (``STEP_PARTS``, then ``rest``: what none claims), adding up to the step;
    empty where no part was recorded (a run that timed none)."""
    measured = {p: s for p in STEP_PARTS if (s := _total(snapshot, step_part_series(stage, p))) > 0}
    if not measured:
        return {}
    return {**measured, REST: max(0.0, step_s - sum(measured.values()))}


def _step_gpu(snapshot: Snapshot, stage: str) -> dict[str, float]:
    """The step's parts' GPU time over the epoch (``perfkit.stages.DeviceParts``): the timed steps'
    sums, scaled by the steps over the steps timed (one in ``EVERY``); empty where none was."""
    timed, steps = snapshot.get(gpu_series(step_series(stage))), snapshot.get(step_series(stage))
    if timed is None or not timed.count or steps is None:
        return {}
    scale = steps.count / timed.count
    found = ((p, _total(snapshot, gpu_series(step_part_series(stage, p)))) for p in (*STEP_PARTS, REST))
    return {p: s * scale for p, s in found if s > 0}


_LOADER_SUBJECTS = ("data_wait", "wait_parts", "stalled_on", "wait_sections")
"""The account's subjects that belong to a loader: a stage's are its loaders' summed."""


def _loader_account(snapshot: Snapshot, loader: str, wall_s: float) -> Account:
    """One loader's part of a stage epoch: its data wait, with that part's subjects."""
    wait, started = _total(snapshot, wait_series(loader)), _total(snapshot, iter_series(loader))
    ended = _total(snapshot, end_series(loader))
    first, first_extra = _first_batches(snapshot, loader)
    subjects = {
        "wait_parts": wait_parts(snapshot, loader),
        "data_wait": {
            "iter": started,
            "first_batch": first,
            "batches": max(0.0, wait - first),
            **({"end": ended} if ended else {}),
        },
        "stalled_on": stalls(snapshot, loader),
        "wait_sections": wait_sections(snapshot, loader),
    }
    return Account(wall_s, {"data_wait": wait + started + ended}, subjects, first_batch_extra_s=first_extra)


def _summed(maps: Iterable[Mapping[str, float]]) -> dict[str, float]:
    out: dict[str, float] = {}
    for m in maps:
        for k, v in m.items():
            out[k] = out.get(k, 0.0) + v
    return out


def _steps_by_loader(snapshot: Snapshot, stage: str, loaders: Sequence[str]) -> dict[str, float]:
    """The stage's step seconds split by loader: a step is the batch of the loader last asked for
    one (its ``iter()`` or its wait began last before the step began), as where a stage runs its
    loaders in turn (Lightning's several validation loaders, a script's loops one after another).
    Steps before any wait go to the first loader. Where the window kept only some of the step
    records, the split is scaled to the steps' total."""
    step = snapshot.get(step_series(stage))
    if step is None:
        return {}
    marks, owner = [], []
    for i, name in enumerate(loaders):
        for series in (wait_series(name), iter_series(name)):
            if series in snapshot:
                starts = snapshot.data(series).starts_ns
                marks.append(starts)
                owner.append(np.full(len(starts), i))
    d = snapshot.data(step_series(stage))
    if not marks or not len(d.durations_ns):
        return {loaders[0]: step.total_s}
    at, who = np.concatenate(marks), np.concatenate(owner)
    order = np.argsort(at, kind="stable")
    at, who = at[order], who[order]
    last = np.searchsorted(at, d.starts_ns, side="right") - 1
    of = np.where(last >= 0, who[np.maximum(last, 0)], 0)
    seconds = np.bincount(of, weights=d.durations_ns.astype(np.float64), minlength=len(loaders)) / 1e9
    scale = step.total_s / float(seconds.sum()) if seconds.sum() > 0 else 0.0
    return {name: float(x) * scale for name, x in zip(loaders, seconds, strict=True)}


def _hooks(snapshot: Snapshot, prefix: str) -> dict[str, float]:
    return {n[len(prefix) :]: snapshot[n].total_s for n in snapshot if n.startswith(prefix)}


def wait_parts(snapshot: Snapshot, loader: str) -> dict[str, float]:
    """Where the main process spent ``loader``'s data wait (its waits, ``iter()`` and its last call:
    ``perfkit.names.WAIT_PARTS``:
    the sampler, making a batch itself, rebuilding a worker's batch, pinning) and ``worker``: the
    rest, blocked until a worker's batch came (``other`` where batches were made here: no
    workers). Empty where none of those was timed (a loader that is no torch DataLoader).

    >>> import perfkit
    >>> reg = perfkit.Registry()
    >>> t0 = reg.clock()
    >>> reg.record("train.data.wait", t0, t0 + 5_000_000)
    >>> reg.record("train.data.sampler", t0, t0 + 1_000_000)
    >>> wait_parts(reg.snapshot(), "train")
    {'sampler': 0.001, 'worker': 0.004}
    """
    out = {p: s for p in WAIT_PARTS if (s := _total(snapshot, wait_part_series(loader, p))) > 0}
    if not out:
        return {}
    rest = "other" if "make" in out else WORKER_WAIT  # batches made here: no worker was waited for
    waited = sum(_total(snapshot, s(loader)) for s in (wait_series, iter_series, end_series))
    out[rest] = max(0.0, waited - sum(out.values()))
    return out


def wait_sections(snapshot: Snapshot, loader: str) -> dict[str, float]:
    """The user's sections that ran inside the loop's waits for ``loader`` in this process (a loader
    without workers makes its batches in the wait: ``__getitem__``, transforms, collate), each by
    its self time, summed by name. What the wait spent outside every section is left out.

    >>> import perfkit
    >>> reg = perfkit.Registry()
    >>> with perfkit.section("train.data.wait", registry=reg):
    ...     with perfkit.section("slow_transform", registry=reg):
    ...         pass
    >>> list(wait_sections(reg.snapshot(), "train"))
    ['slow_transform']
    """
    waits = (wait_series(loader), iter_series(loader))
    tree = snapshot.tree
    inside = {p: t.total_ns for p, t in tree.items() if any(x in waits for x in p[:-1])}
    kids: dict[tuple[str, ...], int] = {}
    for path, ns in inside.items():
        kids[path[:-1]] = kids.get(path[:-1], 0) + ns
    out: dict[str, float] = {}
    for path, ns in inside.items():
        own = max(0, ns - kids.get(path, 0)) / 1e9
        if own > 0:
            out[path[-1]] = out.get(path[-1], 0.0) + own
    return out


RESIDUAL_ZONES = ("before_first_step", "between_steps", "after_last_step")
"""When in a stage epoch its unmeasured time (``other``) happened, in order."""


def residual_zones(
    snapshot: Snapshot,
    stage: str,
    loaders: Sequence[str],
    segments: Sequence[tuple[int, int]],
    other_s: float,
) -> dict[str, float]:
    """``other_s`` split by when it happened: before the first step began, between the first step's
    start and the last step's end, after the last step (the epoch's end: its hooks, its logging).

    Each zone's unmeasured time is its length (while the window was open: ``segments``) less the
    measured records that began in it; the zones are scaled to add up to ``other_s``. Empty when
    no step was recorded.
    """
    step = step_series(stage)
    if step not in snapshot or not other_s:
        return {}
    d = snapshot.data(step)
    if not len(d.starts_ns):
        return {}
    first = float(d.starts_ns.min())
    last = float((d.starts_ns + d.durations_ns).max())
    bounds = [-math.inf, first, last, math.inf]
    zones = itertools.pairwise(bounds)
    length = [sum(max(0.0, min(b, e) - max(a, s)) for s, e in segments) for a, b in zones]
    measured = np.zeros(3)
    for name in _measured(snapshot, stage, loaders):
        m = snapshot.data(name)
        zone = np.searchsorted(np.array([first, last]), m.starts_ns, side="right")
        np.add.at(measured, zone, m.durations_ns.astype(np.float64))
    left = [max(0.0, n - float(m)) for n, m in zip(length, measured, strict=True)]
    total = sum(left)
    if total <= 0:
        return {}
    return {z: other_s * x / total for z, x in zip(RESIDUAL_ZONES, left, strict=True)}


def _measured(snapshot: Snapshot, stage: str, loaders: Sequence[str]) -> list[str]:
    """The series of the account's measured parts for this stage epoch."""
    prefixes = tuple(stage + infix for infix in HOOK_KINDS.values())
    own = {step_series(stage), *(f(name) for name in loaders for f in (wait_series, iter_series))}
    return [n for n in snapshot if n in own or n.startswith(prefixes) or n.endswith(LOADER_SETUP)]


def stalls(snapshot: Snapshot, loader: str) -> dict[str, float]:
    """What the loop was waiting for: the seconds of its waits for ``loader`` that each worker-side
    stage (a section directly inside the workers' fetch of a batch) was running.

    A wait is intersected with the spans of those sections in the workers (their clocks are the
    same monotonic clock); where several overlap one wait, the wait's time is shared in
    proportion, so the stages add up to at most the wait. What no stage covers is left out.
    """
    wait = wait_series(loader)
    if wait not in snapshot:
        return {}
    stages = {p[1] for p in snapshot.tree if len(p) == 2 and p[0] == fetch_series(loader)}
    data = snapshot.data(wait)
    w0 = data.starts_ns.astype(np.float64)
    w1 = w0 + data.durations_ns
    order = np.argsort(w0)
    w0, w1 = w0[order], w1[order]
    overlap: dict[str, np.ndarray] = {}
    for name in stages:
        if name not in snapshot:
            continue
        d = snapshot.data(name)
        in_worker = np.array([snapshot.threads[t].worker is not None for t in d.threads.tolist()], dtype=bool)
        s0 = d.starts_ns[in_worker].astype(np.float64)
        s1 = s0 + d.durations_ns[in_worker]
        overlap[name] = _overlap_per_wait(w0, w1, s0, s1)
    if not overlap:
        return {}
    names = sorted(overlap)
    per_wait = np.vstack([overlap[n] for n in names])  # stages x waits
    covered = per_wait.sum(axis=0)
    scale = np.where(covered > (w1 - w0), (w1 - w0) / np.maximum(covered, 1.0), 1.0)
    seconds = (per_wait * scale).sum(axis=1) / 1e9
    return {n: float(x) for n, x in zip(names, seconds, strict=True) if x > 0}


def _overlap_per_wait(w0: np.ndarray, w1: np.ndarray, s0: np.ndarray, s1: np.ndarray) -> np.ndarray:
    """For each wait [w0, w1), the total overlap with the spans [s0, s1) (waits sorted by start)."""
    out = np.zeros(len(w0))
    if not len(s0):
        return out
    order = np.argsort(s0)
    s0, s1 = s0[order], s1[order]
    longest = float((s1 - s0).max())
    for i in range(len(w0)):
        # spans that start before the wait ends and could still be running when it starts
        lo = np.searchsorted(s0, w0[i] - longest, side="left")
        hi = np.searchsorted(s0, w1[i], side="left")
        if hi > lo:
            a, b = s0[lo:hi], s1[lo:hi]
            out[i] = np.clip(np.minimum(b, w1[i]) - np.maximum(a, w0[i]), 0.0, None).sum()
    return out


def _total(snapshot: Snapshot, name: str) -> float:
    stats = snapshot.get(name)
    return stats.total_s if stats is not None else 0.0


def _first_batches(snapshot: Snapshot, loader: str) -> tuple[float, float]:
    """The first batch of each start of ``loader`` in the window, and what they cost extra.

    A stage can start its loader several times in one epoch (Lightning runs each of several
    validation loaders in turn, each with its own ``iter()``): the waits are split at each
    ``iter()``, and each start's first batch is compared with the other batches of the same
    start, never with another loader's. Returns the first batches' seconds, and by how much they
    exceed their start's typical batch (all of it for a start with one batch).
    """
    name = wait_series(loader)
    if name not in snapshot:
        return 0.0, 0.0
    data = snapshot.data(name)
    if not len(data.starts_ns):
        return 0.0, 0.0
    order = np.argsort(data.starts_ns, kind="stable")
    starts, seconds = data.starts_ns[order], data.durations_ns[order] / 1e9
    iters = snapshot.data(iter_series(loader)).starts_ns if iter_series(loader) in snapshot else ()
    cuts = sorted({0, *(int(i) for i in np.searchsorted(starts, np.sort(iters)) if i < len(starts))})
    first = extra = 0.0
    for a, b in zip(cuts, [*cuts[1:], len(starts)], strict=True):
        first += float(seconds[a])
        typical = float(seconds[a + 1 : b].mean()) if b - a > 1 else 0.0
        extra += max(0.0, float(seconds[a]) - typical)
    return first, extra
