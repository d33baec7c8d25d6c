"""``StageMonitor``: each stage epoch's window as metrics for every sink, and a console block.

For each window of the stages it watches it computes ``stage_metrics`` once, sends them through
one ``SinkFanout`` (each sink's failure isolated), and, with ``console``, says the epoch's block
with its top verdict. A stage run inside an open training epoch (validation every N steps) is
said after training's own block, so the console reads in the order epochs end. At the end of
the run, ``finish`` writes the run's ``verdicts.json`` and says its ranked verdicts. Only the
publishing process (rank 0) sends and says; every rank keeps the metrics.

The intervals of a long epoch still running (``perfkit.stages.Intervals``) are published the same
way, under ``PREFIX/interval/STAGE/...`` at the step ``step_of`` gives, each judged by the same
rules (provisionally) and by ``CHANGE`` against the stage's intervals before it: the first of an
epoch says a whole block marked provisional, with the warm-up it left out; the others a line.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace

from .._snapshot import Snapshot
from ..findings import Case, Diagnosis, Timeline, Verdict, judge, write_diagnosis
from ..reports import interval_line, provisional_text, ranked_verdicts_text, summary_text
from ..run import RunWriter, TrialResult
from ..sinks import Sink, SinkFanout, check_sinks
from ..stages import StageListener, StageWindow, cores_for_workers, stage_metrics

Say = Callable[[str], None]
"""How an adapter logs a block: through ``logging``, clear of its progress bars, on rank 0."""


STEADY = 0.05
"""How much more of an epoch another verdict must explain to replace the last epoch's first one:
two causes within five points swap places from epoch to epoch on noise alone."""


class StageMonitor(StageListener):
    """Publishes each stage epoch's window of ``stages`` (None: every stage); see the module docstring.

    ``step_of(stage)`` gives the step sinks log at (default: a count of windows published);
    ``interval_step_of(stage)`` the step an interval is logged at (default ``step_of``: the global
    step of the interval's last step); ``is_open(stage)`` tells whether a stage epoch is still
    running (a recorder's ``is_open``), to hold the block of a stage run inside training until
    training's own is said.
    """

    def __init__(
        self,
        *,
        say: Say,
        stages: Iterable[str] | None = None,
        sinks: Sequence[Sink] = (),
        prefix: str = "perf",
        user_series: bool = True,
        console: bool = True,
        publish: bool = True,
        step_of: Callable[[str], int] | None = None,
        is_open: Callable[[str], bool] | None = None,
        interval_step_of: Callable[[str], int] | None = None,
    ) -> None:
        if not callable(say):
            raise TypeError(f"say must be callable, got {say!r}")
        self.stages = None if stages is None else tuple(stages)
        """The stages published (None: every stage)."""
        self.say = say
        self.prefix = prefix
        self.user_series = user_series
        self.console = console
        self.publish = publish
        self.fanout = SinkFanout(check_sinks(sinks))
        self.step_of = step_of
        self.is_open = is_open
        self.interval_step_of = interval_step_of or step_of
        self.last_metrics: dict[str, dict[str, float]] = {}
        """The last metrics of each stage (on every rank)."""
        self.trials: tuple[TrialResult, ...] = ()
        """Loader trials run for this run (``perfkit.trial``): the console's worker proposals come
        from them as the summary's do."""
        self._history: dict[str, list[StageWindow]] = {}  # each stage's first epochs (rules compare)
        self._train: StageWindow | None = None
        self._tops: dict[str, tuple[str, str | None]] = {}  # each stage's last top verdict
        self._held: list[str] = []
        self._published = 0
        self._timelines: dict[str, Timeline] = {}
        self._warmups: dict[str, StageWindow] = {}
        self._said: set[tuple[str, int]] = set()  # epochs whose provisional block was said
        self.last_interval_metrics: dict[str, dict[str, float]] = {}
        """The last interval's metrics of each stage (on the publishing rank)."""

    def stage_ended(self, window: StageWindow) -> None:
        stage = window.stage
        if stage != "sanity" and not self.watches(stage):
            return
        metrics = stage_metrics(window, prefix=self.prefix, user_series=self.user_series)
        self.last_metrics[stage] = metrics
        top = self.top_verdict(window) if self.console and self.publish else None
        history = self._history.setdefault(stage, [])
        if len(history) < 2:  # regressions compare with the second epoch, memory with the first
            history.append(window)
        if stage == "train":
            self._train = window
        if not self.publish:
            return
        step = self.step_of(stage) if self.step_of is not None else self._published
        self._published += 1
        self.fanout.emit(window, metrics, step)
        if self.console:
            text = summary_text(window, metrics, prefix=self.prefix, verdict=top)
            if stage != "train" and self.is_open is not None and self.is_open("train"):
                self._held.append(text)  # validation inside a training epoch: said after training's block
            else:
                self.say(text)
                if stage == "train":
                    self.flush()

    def judge_interval(self, window: StageWindow) -> StageWindow:
        """The interval with its provisional verdict and its changes against the intervals before (as
        another monitor of the same recorder judged it, where one did).

        An epoch's last interval (``ends_epoch``) is not judged: its epoch's own window, published
        right after it, has the verdict, and it alone holds the epoch's one-off end (the loader's
        last call shutting its workers down), which judged as an interval read as a change (a
        1-step last interval: INPUT_BOUND 43% and 'other per step went from 111.7 µs to 3.31 ms');
        nor does it join the baseline the next intervals are compared with."""
        if (
            not self.watches(window.stage)
            or not self.publish
            or window.scope == "warmup"
            or window.ends_epoch
            or window.verdicts
        ):
            return window
        top = self.top_verdict(window)
        changes = self._timelines.setdefault(window.stage, Timeline()).judge(window)
        return replace(window, verdicts=(*([top] if top is not None else []), *changes))

    def interval_ended(self, window: StageWindow) -> None:
        stage = window.stage
        if not self.watches(stage) or not self.publish:  # an interval is the publishing rank's own
            return
        if window.scope == "warmup":
            self._warmups[stage] = window  # said with the first interval: what was left out, and why
            self._timelines.setdefault(stage, Timeline()).begin(window)  # a change's time is from here
            return
        prefix = f"{self.prefix}/interval"
        metrics = stage_metrics(window, prefix=prefix, user_series=self.user_series)
        top = next((v for v in window.verdicts if v.kind != "CHANGE"), None)  # judge_interval's
        changes = [v for v in window.verdicts if v.kind == "CHANGE"]
        self.last_interval_metrics[stage] = metrics
        # an epoch's last interval is cut as the epoch ends, where a driver's step counter may have
        # moved past the interval's last step (Lightning's has): its step is the epoch's, that step
        step_of = self.step_of if window.ends_epoch and self.step_of is not None else self.interval_step_of
        step = step_of(stage) if step_of is not None else self._published
        self.fanout.emit(window, metrics, step)
        if not self.console:
            return
        if (stage, window.epoch) not in self._said:
            self._said.add((stage, window.epoch))
            warmup = self._warmups.pop(stage, None)
            self.say(provisional_text(window, metrics, prefix=prefix, verdict=top, warmup=warmup))
            if changes:
                self.say(interval_line(window, metrics, prefix=prefix, verdicts=changes).split("\n", 1)[1])
        else:
            self.say(interval_line(window, metrics, prefix=prefix, verdicts=window.verdicts))

    def watches(self, stage: str) -> bool:
        """Whether ``stage``'s windows are published."""
        return self.stages is None or stage in self.stages

    def flush(self) -> None:
        """Say the blocks held back for training's."""
        held, self._held = self._held, []
        for text in held:
            self.say(text)

    def top_verdict(self, window: StageWindow) -> Verdict | None:
        """The epoch's first verdict, judged against the stage's first epochs and training's last."""
        history = tuple(self._history.get(window.stage, ()))
        case = Case(
            window, history, self._train, cores_for_workers(), window.wall_s, window.wall_s, self.trials
        )
        verdicts, _ = judge(case)
        if not verdicts:
            return None
        top = verdicts[0]
        kept = self._tops.get(window.stage)
        same = next((v for v in verdicts if (v.kind, v.subject) == kept), None)
        if same is not None and top.severity != "critical" and top.share - same.share < STEADY:
            top = same  # within the noise of one epoch to the next: the answer does not flip
        self._tops[window.stage] = (top.kind, top.subject)
        return top

    def finish(self, writer: RunWriter | None, snapshot: Snapshot) -> Diagnosis | None:
        """The run ended: its snapshot and ``verdicts.json`` (of this job) in ``writer``'s run
        directory, and the ranked verdicts said. Nothing is written without a writer, or off rank 0."""
        self.flush()
        if writer is None or not self.publish:
            return None
        writer.finish(snapshot)
        diagnosis = write_diagnosis(writer.path, job=writer.job)  # ranked over the whole run
        if diagnosis is not None and self.console:
            text = ranked_verdicts_text(diagnosis, writer.path)
            if text:
                self.say(text)
        return diagnosis
