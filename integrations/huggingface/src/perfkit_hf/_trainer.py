"""Everything perfkit reads or wraps of a Hugging Face ``Trainer`` that its callback API does not give.

A ``TrainerCallback`` is handed the model, the optimizer and the loaders, never the Trainer;
perfkit needs it twice: to send its metrics through ``Trainer.log`` (so every ``report_to``
tracker gets them) and to see each evaluation's loader before it starts its workers (no
callback event comes between ``get_eval_dataloader`` and the first batch). Both are read here
and nowhere else, checked against transformers 5.24:

* the Trainer is the ``self`` of the frame that dispatches a callback event
  (``Trainer.__init__`` for ``on_init_end``, the training loop for ``on_train_begin``);
* ``get_train_dataloader`` / ``get_eval_dataloader`` / ``get_test_dataloader`` are public
  methods; they are replaced on the instance (never on the class) by wrappers that call the
  original and return its loader wrapped, and ``undo`` puts them back.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any

from transformers import Trainer

GETTERS = {"train": "get_train_dataloader", "val": "get_eval_dataloader", "predict": "get_test_dataloader"}
"""The stage each of the Trainer's loader factories builds a loader for."""

DEPTH = 12
"""How many frames up the dispatching Trainer is looked for (it is 3 to 4 above a callback)."""


def find_trainer() -> Trainer | None:
    """The Trainer whose callback event is running, from the frames above the callback's hook."""
    frame: FrameType | None = sys._getframe(1)
    for _ in range(DEPTH):
        if frame is None:
            return None
        owner = frame.f_locals.get("self")
        if isinstance(owner, Trainer):
            return owner
        frame = frame.f_back
    return None


Wrap = Callable[[str, Any], Any]
"""``wrap(stage, loader)``: what the Trainer gets instead of the loader it built for ``stage``."""


def wrap_loaders(trainer: Trainer, wrap: Wrap) -> Callable[[], None]:
    """Make the Trainer's loader factories return ``wrap(stage, loader)``; returns the undo."""
    replaced: list[str] = []
    for stage, name in GETTERS.items():
        original = getattr(trainer, name, None)
        if original is None or name in vars(trainer):  # absent, or already replaced on this instance
            continue
        setattr(trainer, name, _factory(original, stage, wrap))
        replaced.append(name)

    def undo() -> None:
        for name in replaced:
            vars(trainer).pop(name, None)

    return undo


def _factory(original: Callable[..., Any], stage: str, wrap: Wrap) -> Callable[..., Any]:
    def build(*args: Any, **kwargs: Any) -> Any:
        return wrap(stage, original(*args, **kwargs))

    build.__wrapped__ = original  # type: ignore[attr-defined]
    return build


class StageLoader:
    """A loader the Trainer iterates as before, whose batches also drive one stage's timeline.

    ``on_item(batch)`` runs as each batch is handed out, ``iterate`` is the timed iteration of
    the source (``perfkit.timed_iter``); everything else (``len``, ``dataset``, ``set_epoch``,
    ``batch_sampler``) is the source's.
    """

    def __init__(self, source: Any, iterate: Callable[[Any], Iterator[Any]]) -> None:
        self.__dict__["_source"] = source
        self.__dict__["_iterate"] = iterate

    def __iter__(self) -> Iterator[Any]:
        return self._iterate(self._source)  # type: ignore[no-any-return]

    def __len__(self) -> int:
        return len(self._source)

    def __getattr__(self, attr: str) -> Any:
        return getattr(self.__dict__["_source"], attr)

    def __setattr__(self, attr: str, value: Any) -> None:
        setattr(self._source, attr, value)
