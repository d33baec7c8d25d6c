"""Merging the ranks of a distributed job at the end of each stage epoch, bounded in time and bytes.

Each rank has measured its own epoch (``RankResult``). The merge runs in two rounds of
collectives, on every rank in the same order, each launched without blocking and collected
with one deadline (``Ranks.timeout_s``), so a dead or lagging rank costs the others that
timeout and never the fit:

1. **agree**: one fixed-length row per rank (``all_gather`` of a few integers): a hash of its
   series names and tree paths, the bytes of what it will send, its wall time, data wait and
   step time. Every rank then knows the keys of the fixed-size vectors below (the union of the
   names, fetched only when the hashes differ), and which ranks are the slowest.
2. **exchange**:

   * up to ``EXACT_MAX`` ranks, every rank's whole epoch (pickled, samples included), as
     ``all_gather_object`` did: exact figures, bytes growing with ranks x samples;
   * above, fixed-size vectors: per series its count, total, errors, spread and a quantile
     sketch (``perfkit._sketch``: 1% relative error), summed over ranks with ``all_reduce``;
     min and max with one ``all_reduce(MIN)``; one row of floats per rank (``all_gather``: wall,
     steps, samples, the first batch's extra, the account's parts and overlays -- a rank's
     gradient-sync and collectives' waits --, its step's parts and its collectives' waits by
     step part: where in its step a rank is slow, and where the others wait); and the whole
     account and slowest steps of the ``TOP_K`` slowest ranks only (a ``broadcast`` each; the
     merged account's other subjects are theirs, see ``mean_account``). Bytes a rank sends do
     not grow with the number of ranks but for the rows.

Where a round times out, the window is this rank's alone, ``missing`` names the ranks that had
not reached the merge (from the process group's store), and the merge stays off for the rest of
the run: a rank that comes back late would pair its collectives with the others' next ones.

The transport (``Ranks``) is the framework's: ``perfkit.torch.gather_ranks`` implements it on
``torch.distributed``; this module only packs and unpacks numbers.
"""

from __future__ import annotations

import hashlib
import math
import pickle
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from .._sketch import BUCKETS, Sketch
from .._snapshot import NodeTotals, Snapshot
from .._stats import SeriesData
from ..names import ACCOUNT_OVERLAYS, ACCOUNT_PARTS, COLLECTIVE_PARTS, DATA_WAIT, REST, STEP_PART, STEP_PARTS
from ._account import Account
from ._collective_account import WAIT_BY_PART
from ._window import SlowStep

EXACT_MAX = 8
"""Up to this many ranks every rank's whole epoch is exchanged (exact percentiles, every sample):
a window is tens of kilobytes, so eight of them cost less than the sketches' fixed vectors."""
TOP_K = 3
"""Ranks whose whole account and slowest steps are fetched above ``EXACT_MAX``: the slowest in
wall time, in data wait and in step time (one each, fewer when they coincide)."""
SAMPLES_KEPT = 8100
"""Stand-in samples per series in a sketched merge. Up to this many records, every one is spelled
out (its bucket's value, within 1% of it: so are the percentiles read from them); above, this many
evenly spaced quantiles of the merged sketch, p50, p95 and p99 falling exactly on one of them
(8100 is a multiple of 100). Few enough that a window stays small."""

I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]


@dataclass(frozen=True)
class RankResult:
    """What each rank contributes to a stage epoch's window."""

    rank: int
    snapshot: Snapshot | None  # None when only the details (account, slowest steps) travel
    wall_s: float
    samples: int | None
    slowest: tuple[SlowStep, ...]
    account: Account
    steps: int
    step_mean_s: float
    detailed: bool = True  # False: known by its row alone (its account's parts, no subjects)


@dataclass(frozen=True)
class Merged:
    """A stage epoch merged over ranks: what ``StageWindow`` is built from."""

    snapshot: Snapshot
    ranks: tuple[RankResult, ...]  # every rank's, in rank order (snapshot None but this rank's)
    missing: tuple[int, ...] = ()  # ranks that did not answer: the figures are this rank's alone


@runtime_checkable
class Ranks(Protocol):
    """The collectives a merge needs, each launched on every rank and collected by one deadline;
    ``None`` when it passed (some rank did not answer)."""

    timeout_s: float
    exact_max: int  # up to this many ranks, every rank's whole epoch is exchanged (``EXACT_MAX``)

    def world(self) -> int: ...

    def rank(self) -> int: ...

    def all_gather_ints(self, row: I64) -> I64 | None:
        """Every rank's ``row`` (same length everywhere), as ranks x len."""

    def all_gather_bytes(self, blob: bytes, sizes: Sequence[int]) -> list[bytes] | None:
        """Every rank's ``blob``; ``sizes`` is each rank's length (from the agree round)."""

    def exchange(
        self, sums: I64, mins: I64, fsums: F64, row: F64, blob: bytes, sources: dict[int, int]
    ) -> tuple[I64, I64, F64, F64, dict[int, bytes]] | None:
        """Sums, mins, float sums over ranks, every rank's row (ranks x len), and the blobs of the
        ``sources`` ranks (rank -> its blob's length)."""

    def missing(self) -> tuple[int, ...]:
        """The ranks that had not reached the last round (empty when it cannot be told)."""


def merge(mine: RankResult, ranks: Ranks) -> Merged | None:
    """``mine`` merged with every other rank's; None where a round timed out (``ranks.missing()``
    then names who did not answer)."""
    world = ranks.world()
    assert mine.snapshot is not None
    if world < 2:  # one process (no group, or a group of one): nothing to merge
        return Merged(mine.snapshot, (mine,))
    keys = _keys(mine.snapshot)
    exact = world <= ranks.exact_max
    blob = pickle.dumps(mine if exact else replace(mine, snapshot=None), protocol=pickle.HIGHEST_PROTOCOL)
    names = pickle.dumps(keys, protocol=pickle.HIGHEST_PROTOCOL)
    parts = mine.account.parts
    agree_row = np.array(
        [
            _hash(keys),
            len(blob),
            len(names),
            int(mine.wall_s * 1e9),
            int(parts.get(DATA_WAIT, 0.0) * 1e9),
            int(parts.get(STEP_PART, 0.0) * 1e9),
        ],
        dtype=np.int64,
    )
    agreed = ranks.all_gather_ints(agree_row)
    if agreed is None:
        return None
    if exact:
        blobs = ranks.all_gather_bytes(blob, [int(n) for n in agreed[:, 1]])
        if blobs is None:
            return None
        results = tuple(pickle.loads(b) for b in blobs)
        first = results[0].snapshot
        assert first is not None
        snapshot = first.merge(*(r.snapshot for r in results[1:] if r.snapshot is not None))
        return Merged(snapshot, results)
    if len(set(agreed[:, 0].tolist())) > 1:  # some rank has other series: their union
        lists = ranks.all_gather_bytes(names, [int(n) for n in agreed[:, 2]])
        if lists is None:
            return None
        keys = sorted({k for b in lists for k in pickle.loads(b)})
    sources = {int(r): int(agreed[r, 1]) for r in _slowest(agreed)}
    got = ranks.exchange(*_pack(mine, keys), blob, sources)
    if got is None:
        return None
    sums, mins, fsums, rows, details = got
    fetched = {r: pickle.loads(b) for r, b in details.items()}
    results = tuple(mine if r == mine.rank else fetched.get(r) or _from_row(r, rows[r]) for r in range(world))
    return Merged(_unpack(mine.snapshot, keys, sums, mins, fsums, world), results)


def _keys(snapshot: Snapshot) -> list[str]:
    """The series names (``S:``) and tree paths (``T:``) whose figures the vectors carry."""
    return sorted([f"S:{name}" for name in snapshot] + [f"T:{_SEP.join(p)}" for p in snapshot.tree])


_SEP = "\x1f"


def _hash(keys: Sequence[str]) -> int:
    digest = hashlib.blake2b("\n".join(keys).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little", signed=True)


def _slowest(agreed: I64) -> list[int]:
    """The ranks whose details are fetched: the slowest in wall time, data wait and step time."""
    picked: list[int] = []
    for column in (3, 4, 5):
        r = int(np.argmax(agreed[:, column]))
        if r not in picked:
            picked.append(r)
    return picked[:TOP_K]


_TOTALS = 3  # count, total_ns, errors: a tree path's slot; a series' is followed by its sketch


def _layout(keys: Sequence[str]) -> list[int]:
    """Where each key's slot begins in the sums, and (last) their length: a series takes its
    totals and its sketch's ``BUCKETS`` counts, a tree path its totals alone."""
    sizes = [_TOTALS + BUCKETS if key[0] == "S" else _TOTALS for key in keys]
    return [0, *np.cumsum(sizes).tolist()]


_SUBJECT_ROWS = ((STEP_PART, (*STEP_PARTS, REST)), (WAIT_BY_PART, COLLECTIVE_PARTS))
"""The subjects a rank's row carries at fixed keys: its step's parts, its collectives' waits by part."""
_ROW = (
    "wall_s",
    "samples",
    "steps",
    "step_mean_s",
    "overlap_s",
    "first_batch_extra_s",
    *ACCOUNT_PARTS,
    *ACCOUNT_OVERLAYS,
    *(f"{subject}.{key}" for subject, keys in _SUBJECT_ROWS for key in keys),
)


def _pack(mine: RankResult, keys: Sequence[str]) -> tuple[I64, I64, F64, F64]:
    """This rank's fixed-size vectors: sums (per series: totals and sketch; per tree path:
    totals), mins (per series: min, -max), float sums (per series: m2 + total^2 / count), row."""
    snap = mine.snapshot
    assert snap is not None
    at = _layout(keys)
    sums = np.zeros(at[-1], dtype=np.int64)
    mins = np.full(len(keys) * 2, np.iinfo(np.int64).max, dtype=np.int64)
    fsums = np.zeros(len(keys), dtype=np.float64)
    for i, key in enumerate(keys):
        kind, name = key[0], key[2:]
        if kind == "S" and name in snap:
            d = snap.data(name)
            sums[at[i] : at[i] + 3] = (d.count, d.total_ns, d.errors)
            sums[at[i] + 3 : at[i + 1]] = _sketch_of(d).counts
            mins[2 * i : 2 * i + 2] = (d.min_ns, -d.max_ns)
            fsums[i] = d.m2 + d.total_ns**2 / d.count if d.count else 0.0
        elif kind == "T" and tuple(name.split(_SEP)) in snap.tree:
            t = snap.tree[tuple(name.split(_SEP))]
            sums[at[i] : at[i] + 3] = (t.count, t.total_ns, t.errors)
    a = mine.account
    row = np.array(
        [
            mine.wall_s,
            math.nan if mine.samples is None else mine.samples,
            mine.steps,
            mine.step_mean_s,
            a.overlap_s,
            math.nan if a.first_batch_extra_s is None else a.first_batch_extra_s,
            *(a.seconds(p) for p in ACCOUNT_PARTS),
            *(a.overlays.get(o, math.nan) for o in ACCOUNT_OVERLAYS),  # NaN: not measured
            *(x for subject, keys in _SUBJECT_ROWS for x in _subject_row(a, subject, keys)),
        ],
        dtype=np.float64,
    )
    return sums, mins, fsums, row


def _subject_row(a: Account, subject: str, keys: Sequence[str]) -> list[float]:
    """``subject``'s seconds at ``keys`` (NaN throughout where the rank has none: not measured)."""
    got = a.subjects.get(subject)
    return [math.nan] * len(keys) if not got else [got.get(k, 0.0) for k in keys]


def _sketch_of(d: SeriesData) -> Sketch:
    """The sketch of a series' retained samples, scaled to its exact count where some were
    dropped (the retained ones stand for all)."""
    sketch = Sketch.of(d.durations_ns / 1e9)
    kept = len(d.durations_ns)
    if kept and kept < d.count:
        scaled = np.floor(sketch.counts * (d.count / kept)).astype(np.int64)
        scaled[int(np.argmax(scaled))] += d.count - int(scaled.sum())
        sketch = Sketch(scaled)
    return sketch


def _from_row(rank: int, row: F64) -> RankResult:
    """A rank known by its row alone: its account's parts and overlays, its step's parts and its
    collectives' waits by part; no other subject."""
    v = dict(zip(_ROW, row.tolist(), strict=True))
    overlays = {o: v[o] for o in ACCOUNT_OVERLAYS if not math.isnan(v[o])}
    subjects = {
        subject: {k: v[f"{subject}.{k}"] for k in keys if v[f"{subject}.{k}"] > 0}
        for subject, keys in _SUBJECT_ROWS
        if not math.isnan(v[f"{subject}.{keys[0]}"])
    }
    extra = v["first_batch_extra_s"]
    account = Account(
        v["wall_s"],
        {p: v[p] for p in ACCOUNT_PARTS},
        subjects=subjects,
        overlap_s=v["overlap_s"],
        first_batch_extra_s=None if math.isnan(extra) else extra,
        overlays=overlays,
    )
    samples = None if math.isnan(v["samples"]) else int(v["samples"])
    return RankResult(
        rank, None, v["wall_s"], samples, (), account, int(v["steps"]), v["step_mean_s"], detailed=False
    )


def mean_account(results: Sequence[RankResult]) -> Account:
    """The ranks' mean account (``Account.mean``). Where some ranks are known by their rows alone
    (above ``exact_max``), the parts, overlays and first-batch figure are every rank's mean, and
    the subjects and loaders' accounts the mean of the ranks whose details travelled (the slowest):
    a row-only rank's empty subjects would otherwise dilute every callback's seconds by N. The
    subjects every row carries (the step's parts, the collectives' waits by part) are every rank's."""
    if len(results) == 1:
        return results[0].account
    mean = Account.mean(r.account for r in results)
    detailed = [r.account for r in results if r.detailed]
    if not detailed or len(detailed) == len(results):
        return mean
    known = Account.mean(detailed)
    rows = {subject: mean.subjects[subject] for subject, _ in _SUBJECT_ROWS if subject in mean.subjects}
    return replace(mean, subjects={**known.subjects, **rows}, loaders=known.loaders, dataset=known.dataset)


def _unpack(mine: Snapshot, keys: Sequence[str], sums: I64, mins: I64, fsums: F64, world: int) -> Snapshot:
    """The merged snapshot from the summed vectors: exact counts, totals, errors, min, max and
    spread; percentiles from the merged sketch (stand-in samples: ``SAMPLES_KEPT``); this
    rank's gauges and threads (per-thread splits are not merged)."""
    series: dict[str, SeriesData] = {}
    tree: dict[tuple[str, ...], NodeTotals] = {}
    at = _layout(keys)
    for i, key in enumerate(keys):
        count, total, errors = (int(x) for x in sums[at[i] : at[i] + 3])
        if not count:
            continue
        kind, name = key[0], key[2:]
        if kind == "T":
            tree[tuple(name.split(_SEP))] = NodeTotals(count, total, errors)
            continue
        sketch = Sketch(sums[at[i] + 3 : at[i + 1]].copy())
        spelled = (
            sketch.values()
            if count <= SAMPLES_KEPT
            else sketch.quantiles(np.linspace(0, 1, SAMPLES_KEPT + 1))
        )
        kept = np.rint(spelled * 1e9).astype(np.int64)
        n = len(kept)
        lo, hi = int(mins[2 * i]), -int(mins[2 * i + 1])
        series[name] = SeriesData(
            count=count,
            total_ns=total,
            errors=errors,
            m2=max(float(fsums[i]) - total**2 / count, 0.0),
            min_ns=lo,
            max_ns=hi,
            durations_ns=np.clip(kept, lo, hi),
            starts_ns=np.zeros(n, dtype=np.int64),
            threads=np.zeros(n, dtype=np.int64),
            sample_errors=np.zeros(n, dtype=bool),
        )
    return Snapshot(
        series,
        tree=tree,
        threads=mine.threads[:1],
        gauges={name: mine.gauge_data(name) for name in mine.gauges},
        start_ns=mine.start_ns,
        end_ns=mine.end_ns,
        dropped=mine.dropped,
        sketched=world,
    )


def not_merged(ranks: Ranks, missing: Sequence[int]) -> str:
    """The words for a merge given up: which ranks did not answer, and what follows."""
    who = f"rank(s) {', '.join(map(str, missing))}" if missing else "some rank"
    return (
        f"perfkit: {who} did not answer the epoch's merge within {ranks.timeout_s:g} s: each rank keeps "
        "its own figures, and the merge is off for the rest of the run (a late rank would pair "
        "its collectives with the others' next ones)"
    )
