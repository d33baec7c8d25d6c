"""Everything perfkit reads or wraps inside Lightning, in one place.

Checked against Lightning 2.1 to 2.6.6. Each private name below says what it is for; if
a Lightning release moves one, ``check`` names it, and the monitor says so once and
leaves the stage alone rather than report wrong numbers.

* ``trainer.fit_loop`` / ``validate_loop`` / ``test_loop`` / ``predict_loop`` and
  ``fit_loop.epoch_loop.val_loop`` (public attributes): their ``run`` methods (eval
  loops) and ``fit_loop.setup_data`` / ``on_advance_start`` / ``on_advance_end`` are
  wrapped per instance, so a stage epoch's window spans what Lightning does for it: building
  and starting its loaders (which happens before ``on_validation_epoch_start``), the steps,
  and the epoch-end hooks and logging.
* ``loop._data_source`` (private, 2.0+): ``.dataloader()`` is wrapped so each loader is
  instrumented the moment it is built, and building it is timed.
* ``fit_loop.epoch_loop._batches_that_stepped`` (private, 2.0+): the step Lightning logs a
  training epoch's own metrics at, so perfkit's rows line up with them.
* ``trainer.profiler`` (public): wrapped by ``HookClock``, which sees every hook Lightning
  runs (``[Callback]KEY.HOOK``, ``[LightningModule]NAME.HOOK``, ``run_training_batch``,
  ``[Strategy]...validation_step``) whatever order the callbacks are in.
* ``trainer.loggers`` (public): each logger's ``log_metrics``, ``save`` and ``finalize`` are
  wrapped per instance (Lightning's profiler does not see them), so a slow logger is named.
* ``trainer.strategy.model`` (public): under a DDP strategy, the ``DistributedDataParallel``
  wrapper from ``on_fit_start`` on; its gradient all-reduce is timed (``time_gradient_sync``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from lightning.pytorch import Callback, Trainer

Undo = Callable[[], None]

FIT_WRAPPED = ("setup_data", "on_advance_start", "on_advance_end")


def eval_loops(trainer: Trainer) -> list[tuple[Any, str]]:
    """The evaluation loops and the stage each runs."""
    return [
        (trainer.fit_loop.epoch_loop.val_loop, "val"),
        (trainer.validate_loop, "val"),
        (trainer.test_loop, "test"),
        (trainer.predict_loop, "predict"),
    ]


def data_sources(trainer: Trainer) -> list[tuple[Any, str]]:
    """Each loop's ``_data_source`` (whose ``dataloader()`` builds its loaders) and its stage."""
    loops = [(trainer.fit_loop, "train"), *eval_loops(trainer)]
    return [(getattr(loop, "_data_source", None), stage) for loop, stage in loops]


def check(trainer: Trainer) -> str | None:
    """What this Lightning lacks of what perfkit wraps, in words (None: everything is there)."""
    for loop, stage in [(trainer.fit_loop, "train"), *eval_loops(trainer)]:
        names = FIT_WRAPPED if stage == "train" and loop is trainer.fit_loop else ("run",)
        for name in names:
            if not callable(getattr(loop, name, None)):
                return f"{type(loop).__name__}.{name}"
    for source, stage in data_sources(trainer):
        if source is None or not callable(getattr(source, "dataloader", None)):
            return f"the {stage} loop's _data_source.dataloader"
    if not hasattr(trainer.fit_loop.epoch_loop, "_batches_that_stepped"):
        return "fit_loop.epoch_loop._batches_that_stepped"
    return None


def wrap(obj: Any, name: str, make: Callable[[Callable[..., Any]], Callable[..., Any]]) -> Undo:
    """Replace ``obj.name`` by ``make(original)`` on this instance only; returns the undo."""
    original = getattr(obj, name)
    setattr(obj, name, make(original))

    def undo() -> None:
        obj.__dict__.pop(name, None)  # the class's own method shows through again

    return undo


def log_step(trainer: Trainer, stage: str, *, interval: bool = False) -> int:
    """The step Lightning logs ``stage``'s epoch metrics at.

    Lightning logs a training epoch's metrics at the index of its last batch, and validation
    (which runs before the counter moves on) at the counter itself: line up with both. An
    interval is cut as its last step ends, before the counter moves on: the counter is that
    step's global index.
    """
    stepped = int(trainer.fit_loop.epoch_loop._batches_that_stepped)
    return max(0, stepped - 1) if stage == "train" and not interval else stepped


def total_steps(trainer: Trainer, stage: str) -> int | None:
    """How many steps ``stage``'s epoch will run (None when Lightning cannot tell)."""
    value: Any
    if stage == "train":
        value = trainer.num_training_batches
    elif stage in ("val", "sanity"):
        value = trainer.num_sanity_val_batches if stage == "sanity" else trainer.num_val_batches
    elif stage == "test":
        value = trainer.num_test_batches
    else:
        value = trainer.num_predict_batches
    if isinstance(value, list):
        value = sum(value) if value else None
    if isinstance(value, float):  # inf: an iterable without a length
        return None if value == float("inf") else int(value)
    return value if isinstance(value, int) else None


def step_based(trainer: Trainer) -> bool:
    """Whether training is a run of steps rather than of epochs: its loader has no length, or
    ``max_steps`` ends the fit inside the first epoch (one pass over a large data set)."""
    batches = total_steps(trainer, "train")
    max_steps = int(getattr(trainer, "max_steps", -1) or -1)
    return batches is None or 0 < max_steps <= batches


def overrides(obj: object, hook: str, base: type = Callback) -> bool:
    """Whether ``obj``'s class (a callback, a LightningModule: ``base``) defines its own ``hook``
    (Lightning calls every hook anyway)."""
    mine = getattr(type(obj), hook, None)
    theirs = getattr(base, hook, None)
    return mine is not None and mine is not theirs


LOGGER_METHODS = ("log_metrics", "save", "finalize")
"""The methods of a logger timed as its time (Lightning's profiler does not see loggers)."""


def logger_methods(trainer: Trainer) -> list[tuple[Any, str, str]]:
    """Each logger of ``trainer``, each method of it to time, and its owner name ``CLASS.METHOD``
    (a second logger of one class is ``CLASS#2.METHOD``)."""
    out = []
    seen: dict[str, int] = {}
    for logger in trainer.loggers:
        name = type(logger).__name__
        seen[name] = seen.get(name, 0) + 1
        label = name if seen[name] == 1 else f"{name}#{seen[name]}"
        out += [(logger, m, f"{label}.{m}") for m in LOGGER_METHODS if callable(getattr(logger, m, None))]
    return out
