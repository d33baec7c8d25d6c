"""A diagnosis: every rule on every stage of a run, the verdicts ranked by the time they explain.

Each stage is judged on its last epoch (past the first epoch's warm-up when there are
several), against its own earlier epochs and, for evaluation stages, the last training
window. Verdicts are ranked by ``run_share``: the share of the run's measured time they
explain.

    d = diagnose(read_run("lightning_logs/version_0/perfkit"))
    d.top.line          # 'INPUT_BOUND (61% of val epoch 1): ...'
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace

from .._rule import Abstention, Verdict
from .._units import format_seconds, plural
from ..loaders import TrialResult
from ..names import STAGES
from ..run import RunData
from ..stages import PARTS, StageWindow, cores_for_workers
from ._case import Case, step_count
from ._partition import partition
from ._verdict import Diagnosis, StageSummary
from .rules import RULES, Rule

MIN_STEPS = 3
MIN_WALL_S = 0.05
"""The least evidence a stage epoch is judged on: three steps and 50 ms. Below that an epoch is its
one-off costs (a first batch, a checkpoint written after one step, a crash on the first batch):
a 1-batch epoch read "CHECKPOINT 67%", a 4.8 ms validation got a profiler window. A stage is
judged on its last epoch with enough evidence; with none, every rule abstains, saying why."""

UNJUDGED = "every rule"
"""The rule an abstention names where a stage epoch held too little to judge."""

RUN_FLOOR = 0.02
"""A verdict explaining less of the run than this is context, not a problem: below a fiftieth of
the run, following its action cannot pay for the attention it takes (run-to-run noise on a
loaded machine is of that size)."""


def diagnose(run: RunData, *, cores: int | None = None, rules: Sequence[Rule] = RULES) -> Diagnosis:
    """Judge every stage of ``run`` (a run directory read by ``perfkit.run.read_run``); the changes
    its interval windows called are its ``changes``."""
    diagnosis = diagnose_windows(
        [w.window for w in sorted(run.windows, key=lambda w: w.start_ns)],
        cores=cores,
        rules=rules,
        lost=_lost(run),
        trials=run.trials,
    )
    return replace(diagnosis, changes=_changes(run))


def diagnose_windows(
    windows: Iterable[StageWindow],
    *,
    cores: int | None = None,
    rules: Sequence[Rule] = RULES,
    lost: dict[str, float] | None = None,
    trials: Sequence[TrialResult] = (),
) -> Diagnosis:
    """Judge the stage windows of a run, given oldest first; ``trials``: the loader trials the run
    recorded (a worker proposal's gain then comes from the measured rates)."""
    by_stage: dict[str, list[StageWindow]] = {}
    for w in windows:
        if w.stage != "sanity":
            by_stage.setdefault(w.stage, []).append(w)
    walls = {stage: sum(w.wall_s for w in ws) for stage, ws in by_stage.items()}
    run_wall = sum(walls.values())
    train = by_stage.get("train", [])
    verdicts: list[Verdict] = []
    abstained: list[Abstention] = []
    for stage in _ordered(by_stage):
        ws = by_stage[stage]
        judged = [i for i, w in enumerate(ws) if enough(w)]
        if not judged:
            last = ws[-1]
            abstained.append(
                Abstention(
                    UNJUDGED,
                    stage,
                    last.epoch,
                    f"more than {plural(step_count(last), 'step')} in {format_seconds(last.wall_s)} to "
                    f"judge ({MIN_STEPS} steps and {format_seconds(MIN_WALL_S)} at least)",
                )
            )
            continue
        ws = ws[: judged[-1] + 1]
        case = Case(
            ws[-1],
            tuple(ws[:-1]),
            _reference(train, ws[-1]),
            cores or cores_for_workers(),
            walls[stage],
            run_wall,
            tuple(trials),
        )
        found, missing = judge(case, rules)
        verdicts += found
        abstained += missing
    verdicts.sort(key=lambda v: (-_urgent(v), -v.run_share, v.kind))
    problems = [v for v in verdicts if _urgent(v) or v.run_share >= RUN_FLOOR]
    return Diagnosis(
        verdicts=tuple(problems),
        context=tuple(v for v in verdicts if v not in problems),
        abstentions=tuple(abstained),
        stages=tuple(_summary(stage, by_stage[stage]) for stage in _ordered(by_stage)),
        memory_peaks_mb=_memory(w for ws in by_stage.values() for w in ws),
        lost=lost or {},
    )


def enough(window: StageWindow) -> bool:
    """Whether ``window`` holds enough to judge (``MIN_STEPS`` steps over ``MIN_WALL_S``)."""
    return step_count(window) >= MIN_STEPS and window.wall_s >= MIN_WALL_S


def judge(case: Case, rules: Sequence[Rule] = RULES) -> tuple[list[Verdict], list[Abstention]]:
    """Every rule on one stage epoch: its verdicts (largest share first) and its abstentions.

    Three steps, as torch.profiler's pattern matcher matches before it benchmarks: each rule finds
    (``Rule.find``), the epoch's seconds are partitioned between what they found (``partition``),
    then each verdict left gets its rule's proposal (``Rule.advise``), on the share it kept."""
    found: list[Verdict] = []
    missing: list[Abstention] = []
    for rule in rules:
        for outcome in rule.find(case):
            if isinstance(outcome, Verdict):
                found.append(outcome)
            else:
                missing.append(outcome)
    budget = {p: case.fraction(p) for p in PARTS}
    of = {r.kind: r for r in rules}
    advised = [of[v.kind].advise(case, v) for v in partition(found, budget, rules)]
    return sorted(advised, key=lambda v: (-_urgent(v), -v.share)), missing


def _reference(train: list[StageWindow], window: StageWindow) -> StageWindow | None:
    """The training epoch ``window`` is compared with: the last one ended before it began, as the
    console judged it when it ended (Lightning validates inside a training epoch, before it ends),
    so a ratio and what explains it read the same in the console and the summary."""
    if window.stage == "train":
        return train[-1] if train else None
    ended = [t for t in train if t.snapshot.end_ns <= window.snapshot.start_ns]
    return ended[-1] if ended else (train[-1] if train else None)


def _urgent(v: Verdict) -> bool:
    """A risk that must come first whatever time it costs (memory that runs out within the horizon)."""
    return v.severity == "critical"


def _ordered(by_stage: dict[str, list[StageWindow]]) -> list[str]:
    return sorted(by_stage, key=lambda s: (STAGES.index(s) if s in STAGES else len(STAGES), s))


def _summary(stage: str, windows: list[StageWindow]) -> StageSummary:
    last = windows[-1]
    a = last.account
    return StageSummary(
        stage=stage,
        epochs=len(windows),
        wall_s=sum(w.wall_s for w in windows),
        last_epoch=last.epoch,
        account={p: a.seconds(p) for p in PARTS},
        account_fractions={p: a.fraction(p) for p in PARTS},
        subjects={k: dict(v) for k, v in a.subjects.items() if v},
    )


def _memory(windows: Iterable[StageWindow]) -> dict[str, float]:
    peaks: dict[str, float] = {}
    for w in windows:
        for name, g in w.snapshot.gauges.items():
            if name.endswith("_mb") and not name.startswith("system."):  # peaks of use, not of free memory
                peaks[name] = max(peaks.get(name, 0.0), g.max)
    return peaks


def _changes(run: RunData) -> tuple[Verdict, ...]:
    """Each CHANGE the run's intervals called, once: a change in force is called again by every
    interval after it, with the step it began at."""
    seen: set[tuple[str | None, int | None, str | None, float | None]] = set()
    out = []
    for x in run.intervals:
        for v in x.verdicts:
            key = (v.stage, v.epoch, v.subject, v.evidence.get("start_step"))
            if v.kind == "CHANGE" and key not in seen:
                seen.add(key)
                out.append(v)
    return tuple(out)


def _lost(run: RunData) -> dict[str, float]:
    dropped = sum(w.snapshot.dropped_in_transfer for w in run.windows)
    return {"worker_records_dropped": float(dropped)} if dropped else {}
