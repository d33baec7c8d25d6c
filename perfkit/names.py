"""perfkit's vocabulary: every series, part, mark and metadata name that one module writes and another reads.

Writers (entry points, loaders, the stage recorder, the profiler tracer) and readers (stage
metrics, findings, the report, the trace analyser, the Lightning integration) all import
their names from here, so a name is spelled once.

A *stage* is one of ``STAGES`` (a loop over a data set: training, validation, test,
prediction); a *loader* is named after the stage that iterates it (of several in one stage, the
``k``-th from the second on is ``STAGE/k``: ``loader_name``), or freely in a plain script.
Records of a stage epoch:

==========================  ===========================================================
``STAGE.step``              the step's own compute, one record per batch
``LOADER.data.wait``        how long each ``next()`` on the loader blocked
``LOADER.data.iter``        ``iter()`` on the loader (starting DataLoader workers)
``LOADER.data.fetch``       each batch's time in its DataLoader worker
``LOADER.loop.turn``        ``timed_iter``: one request for an item to the next
``STAGE.hook.OWNER``        time in another component's hooks during the stage (a callback)
``STAGE.checkpoint.OWNER``  a checkpoint callback's hooks (saving checkpoints): ``callbacks`` too
``STAGE.module_hook.HOOK``  the model's own hooks run outside a step (a LightningModule's ``on_*``)
``STAGE.logger.CLASS.M``    a logger's method ``M`` (``log_metrics``, ``save``, ``finalize``)
``STAGE.loader_setup``      building the stage's loaders (a framework asking for them)
``STAGE.optimizer_step``    the optimizer's step inside a step, where a framework says when it
                            runs (the Hugging Face Trainer: one per gradient-accumulation cycle)
``NAME.gpu``                the GPU time of a ``cuda=True`` section or ``@timed`` function
``NAME.recursion``          calls of ``NAME`` made while a call of it was open on their path
                            (recursion): counted, and how deep, never added to a tree's time
``dist.wait``               a ``torch.distributed`` collective called from Python (``perfkit run``)
``dist.grad_wait``          one per DDP step: how long the rank waited for its gradient all-reduce
                            past its own backward (``perfkit.torch.time_gradient_sync``); inside
                            ``STAGE.step``, and the account's overlay ``sync_wait``
==========================  ===========================================================

A *part* is a piece of a step's (or a stage epoch's) time. Two splits use one set of names:

==============  ========================================================================
the account     ``data_wait``, ``step``, ``callbacks``, ``module_hooks``, ``loggers``,
                ``loader_setup``, ``other``: a stage epoch's wall time, measured by perfkit's
                timers (``ACCOUNT_PARTS``)
a trace         ``data_wait``, ``forward``, ``backward``, ``optimizer``, ``other``: the
                profiled steps of a torch.profiler trace, from its marks (``TRACE_PARTS``)
==============  ========================================================================

``forward``, ``backward`` and ``optimizer`` are the pieces of ``step`` that a trace can see;
``other`` is, in both, the time nothing measured covers. An *overlay* is a measured piece of one
account part, not a part of its own (the parts still add up to the wall time): ``sync_wait`` is
the seconds of ``step`` spent waiting for the other ranks in DDP's gradient all-reduce, so
``step`` less ``sync_wait`` is the rank's own compute (``ACCOUNT_OVERLAYS``).

>>> step_series("val"), wait_series("val"), fetch_series("train")
('val.step', 'val.data.wait', 'train.data.fetch')
>>> part_label(DATA_WAIT), MARK_FORWARD
('data wait', 'perfkit.part.forward')
"""

from __future__ import annotations

import re
from collections.abc import Iterable

STAGES = ("train", "val", "test", "predict")
"""The stages a training program runs, in the order a report lists them."""

STAGE_LABELS = {"train": "training", "val": "validation", "test": "testing", "predict": "prediction"}

DATA = ".data"
WAIT = DATA + ".wait"
ITER = DATA + ".iter"
FETCH = DATA + ".fetch"
TURN = ".loop.turn"
STEP = ".step"
HOOK = ".hook."
CHECKPOINT_HOOK = ".checkpoint."
MODULE_HOOK = ".module_hook."
LOGGER = ".logger."
LOADER_SETUP = ".loader_setup"
OPTIMIZER_STEP = ".optimizer_step"
GPU = ".gpu"
RECURSION = ".recursion"

RUN_DIR_NAME = "perfkit-run"
"""The run directory's default folder name (under a log or output folder, or the working one).
Not an identifier on purpose: a folder named like the package (the old default, ``perfkit``)
shadows it for ``import perfkit`` in that working folder under an editable install."""

OLD_RUN_DIR_NAMES = ("perfkit",)
"""Default run directory names of earlier versions, still found by the readers."""

RUN_DIR_ENV = "PERFKIT_RUN_DIR"
"""The environment variable ``perfkit run`` hands its run directory to the command's processes in."""

DIST_WAIT = "dist.wait"
"""Time in a ``torch.distributed`` collective called from Python (``perfkit run`` times them)."""

GRAD_WAIT = "dist.grad_wait"
"""Each DDP step's wait for its gradient all-reduce past the rank's own backward: from the launch of
its last bucket to the completion of all of them (``perfkit.torch.time_gradient_sync``). Free of any
stage: it lands in the stage epoch whose window is open (training), inside its steps."""


def stage_label(stage: str) -> str:
    """``"val"`` -> ``"validation"``; an unknown stage is its own label, printable (``display_name``)."""
    return STAGE_LABELS.get(stage) or display_name(stage)


def step_series(stage: str) -> str:
    """The step's own compute in ``stage``."""
    return stage + STEP


def wait_series(loader: str) -> str:
    """How long each ``next()`` on ``loader`` blocked."""
    return loader + WAIT


def iter_series(loader: str) -> str:
    """``iter()`` on ``loader``: worker start-up for a DataLoader without persistent workers."""
    return loader + ITER


def fetch_series(loader: str) -> str:
    """Each batch's time in a DataLoader worker of ``loader``."""
    return loader + FETCH


def turn_series(loader: str) -> str:
    """``timed_iter``'s loop turns: from one request for an item to the next."""
    return loader + TURN


def wait_cpu_gauge(loader: str) -> str:
    """This process's CPU seconds during one ``next()`` on ``loader`` (a loader without workers
    makes its batch then): a sample per batch."""
    return loader + WAIT + "_cpu_s"


def fetch_cpu_gauge(loader: str) -> str:
    """A DataLoader worker's CPU seconds making one batch of ``loader``: a sample per batch."""
    return loader + FETCH + "_cpu_s"


def loop_cpu_gauge(loader: str) -> str:
    """This process's CPU seconds between two ``next()`` on ``loader`` (the loop's body, every
    thread of the process: torch's intra-op threads too): a sample per batch."""
    return loader + ".loop.cpu_s"


LOADER_SETTINGS = ("num_workers", "prefetch_factor", "persistent_workers", "pin_memory", "batch_size")
"""The DataLoader settings a run records per loader (booleans as 0/1; an unset one is absent)."""


def setting_gauge(loader: str, setting: str) -> str:
    """One of ``LOADER_SETTINGS`` as ``loader`` ran it, sampled once per ``iter()``.

    >>> setting_gauge("train", "num_workers")
    'train.loader.num_workers'
    """
    return f"{loader}.loader.{setting}"


TORCH_THREADS = "process.torch_threads"
"""torch's intra-op thread count (``torch.get_num_threads()``) when a loader started."""
USABLE_CORES = "system.usable_cores"
"""The cores this process may run on (its CPU affinity) when a loader started."""
MEMORY_AVAILABLE = "system.memory_available_mb"
"""The host's memory still available to new processes (psutil's ``available``), every sample."""
WORKERS_USS = "workers.uss_mb"
"""The DataLoader workers' own memory (USS) summed; each worker's is ``worker_uss_gauge``."""


def worker_uss_gauge(index: int) -> str:
    """The own memory (USS: the pages no other process shares) of the ``index``-th child process.

    >>> worker_uss_gauge(0)
    'worker0.uss_mb'
    """
    return f"worker{index}.uss_mb"


def hook_series(stage: str, owner: str, kind: str = HOOK) -> str:
    """Time spent in ``owner``'s hooks during ``stage``; ``kind`` is one of ``HOOK_KINDS``' infixes:
    a callback's (``HOOK``), a checkpoint callback's, the model's own hook, a logger's method.

    >>> hook_series("train", "ModelCheckpoint"), hook_series("train", "CSVLogger.save", LOGGER)
    ('train.hook.ModelCheckpoint', 'train.logger.CSVLogger.save')
    """
    return stage + kind + owner


def loader_setup_series(stage: str) -> str:
    """Building ``stage``'s loaders: the framework asking the user's code for them."""
    return stage + LOADER_SETUP


def optimizer_series(stage: str) -> str:
    """The optimizer's step inside ``stage``'s steps (one per gradient-accumulation cycle)."""
    return stage + OPTIMIZER_STEP


def gpu_series(name: str) -> str:
    """The GPU time of section or function ``name`` (``cuda=True``)."""
    return name + GPU


def recursion_series(name: str) -> str:
    """The calls of section or function ``name`` made inside an open one (recursion): a call path
    that re-enters a name folds into one node (``perfkit._context``), whose records these are.

    >>> recursion_series("walk"), recursed_name("walk.recursion"), recursed_name("walk")
    ('walk.recursion', 'walk', None)
    """
    return name + RECURSION


def recursed_name(series: str) -> str | None:
    """The name whose recursion ``series`` records (``recursion_series``' inverse), else None."""
    return series[: -len(RECURSION)] if series.endswith(RECURSION) and len(series) > len(RECURSION) else None


LOADER_INDEX = "/"
"""Between a stage and the index of one of its several loaders: ``val/1`` is validation's second."""


def loader_name(stage: str, index: int) -> str:
    """The name of the ``index``-th loader a stage iterates (Lightning's ``dataloader_idx``, a
    script's second loop in one window): the first keeps the stage's name, so a stage with one
    loader reads as it always did.

    >>> loader_name("val", 0), loader_name("val", 1)
    ('val', 'val/1')
    """
    return stage if index == 0 else f"{stage}{LOADER_INDEX}{index}"


def loader_index(name: str, loader: str) -> int | None:
    """The index of loader ``name`` among ``loader``'s (``loader_name``'s inverse); None when
    ``name`` is not one of them.

    >>> loader_index("val/2", "val"), loader_index("val", "val"), loader_index("value", "val")
    (2, 0, None)
    """
    if name == loader:
        return 0
    rest = name[len(loader) + len(LOADER_INDEX) :] if name.startswith(loader + LOADER_INDEX) else ""
    return int(rest) if rest.isdigit() and not rest.startswith("0") else None


def stage_loaders(series: Iterable[str], loader: str) -> list[str]:
    """The loaders named after ``loader`` that have a wait or an ``iter()`` among ``series`` (the
    names of a snapshot), in index order; ``[loader]`` when none has.

    >>> stage_loaders(["val/1.data.wait", "val.data.wait", "val.step"], "val")
    ['val', 'val/1']
    """
    found: dict[int, str] = {}
    for name in series:
        for suffix in (WAIT, ITER):
            if name.endswith(suffix):
                index = loader_index(name[: -len(suffix)], loader)
                if index is not None:
                    found[index] = name[: -len(suffix)]
    return [found[i] for i in sorted(found)] or [loader]


def loader_label(name: str, loader: str, dataset: str | None = None) -> str:
    """How a verdict names one of a stage's several loaders: ``val loader 1 (SlowDataset)``.

    >>> loader_label("val/1", "val", "SlowDataset"), loader_label("val", "val")
    ('val loader 1 (SlowDataset)', 'val loader 0')
    """
    label = f"{loader} loader {loader_index(name, loader)}"
    return f"{label} ({dataset})" if dataset else label


def loader_of(name: str) -> str:
    """The loader name a user gave, without a trailing ``.data`` (an older spelling of it).

    >>> loader_of("train.data"), loader_of("train")
    ('train', 'train')
    """
    return name[: -len(DATA)] if name.endswith(DATA) and len(name) > len(DATA) else name


def is_stage_series(name: str) -> bool:
    """Whether ``name`` is one of perfkit's own stage or loader series (not a user's section).

    >>> [is_stage_series(n) for n in ("val.data.wait", "val.hook.ModelCheckpoint", "collate")]
    [True, True, False]
    """
    if name == GRAD_WAIT or name.endswith((STEP, WAIT, ITER, FETCH, TURN, LOADER_SETUP, OPTIMIZER_STEP)):
        return True
    return any(name.startswith(stage + kind) for stage in STAGES for kind in HOOK_KINDS.values())


DATA_WAIT = "data_wait"
FORWARD = "forward"
BACKWARD = "backward"
OPTIMIZER = "optimizer"
CALLBACKS = "callbacks"
MODULE_HOOKS = "module_hooks"
LOGGERS = "loggers"
CHECKPOINT = "checkpoint"  # not a part: the subject of ``callbacks`` that saves checkpoints
OTHER = "other"
STEP_PART = "step"  # STEP and LOADER_SETUP above are the series' suffixes
LOADER_SETUP_PART = "loader_setup"

ACCOUNT_PARTS = (DATA_WAIT, STEP_PART, CALLBACKS, MODULE_HOOKS, LOGGERS, LOADER_SETUP_PART, OTHER)
"""The parts of a stage epoch's account, in the order a report stacks them."""

SYNC_WAIT = "sync_wait"
COMPUTE = "compute"  # not a part: ``step`` less its ``sync_wait``, where that was measured

ACCOUNT_OVERLAYS = {SYNC_WAIT: STEP_PART}
"""The account's overlays (measured pieces inside one part, not adding to the wall time), each with
the part it lies inside: a fixed set, so a per-rank row of parts and overlays has a fixed length."""

HOOK_KINDS = {CALLBACKS: HOOK, CHECKPOINT: CHECKPOINT_HOOK, MODULE_HOOKS: MODULE_HOOK, LOGGERS: LOGGER}
"""The series infix of each kind of hook time, by the account subject it goes to (a checkpoint
callback's time is part of ``callbacks``, under its own subject)."""

# A trace knows data loading only as the loader's fetch on the main thread (torch's
# ``enumerate(DataLoader)#...``, Lightning's ``..._next``, perfkit's mark of the loader's wait): that
# is the loop waiting for data, the account's ``data_wait``. What no mark covers is ``other``.
TRACE_PARTS = (DATA_WAIT, FORWARD, BACKWARD, OPTIMIZER, OTHER)
"""The parts of a profiled step, in the order trace text lists them."""

OLD_TRACE_PARTS = {"data_loading": DATA_WAIT, "unaccounted": OTHER}
"""The old names of two trace parts, still read in trace analyses written before they were renamed."""


# Profiler marks: ranges perfkit opens in a torch.profiler trace while a profiler window records,
# and that ``perfkit.trace`` reads back to split each step into parts.
MARK_PREFIX = "perfkit.part."
MARK_DATA_WAIT = MARK_PREFIX + DATA_WAIT
MARK_FORWARD = MARK_PREFIX + FORWARD
MARK_BACKWARD = MARK_PREFIX + BACKWARD
MARK_OPTIMIZER = MARK_PREFIX + OPTIMIZER
# The marks' old names (``perfkit.phase.*``), written by perfkit 0.1: still read in traces.
OLD_MARK_PREFIX = "perfkit.phase."
OLD_MARKS = {
    OLD_MARK_PREFIX + "data_fetch": MARK_DATA_WAIT,
    OLD_MARK_PREFIX + "forward": MARK_FORWARD,
    OLD_MARK_PREFIX + "backward": MARK_BACKWARD,
    OLD_MARK_PREFIX + "optimizer_step": MARK_OPTIMIZER,
}


def part_label(part: str) -> str:
    """A part's name in text: ``"data_wait"`` -> ``"data wait"``."""
    return part.replace("_", " ")


TRACE_METADATA_KEY = "perfkit"
"""Top-level key of a Chrome trace written in a profiler window: ``{"sections": [...]}``."""


NAME_WIDTH = 120
"""The most characters ``display_name`` prints of a name; longer ones lose their middle."""

_BIDI = "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
_UNPRINTABLE = re.compile(f"[\x00-\x1f\x7f-\x9f\u2028\u2029{_BIDI}\ud800-\udfff]")
_SHORT = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    if char in _SHORT:
        return _SHORT[char]
    return f"\\x{ord(char):02x}" if ord(char) < 0x100 else f"\\u{ord(char):04x}"


def display_name(name: object, width: int | None = NAME_WIDTH) -> str:
    """A name the user gave (a section, a stage, a loader, an op in a trace) safe to print on one line.

    Names come from file paths, f-strings and data: a newline would break a report's line, a
    carriage return or an escape sequence overwrite it, a bidi override (U+202E) reorder the
    rest of it, a NUL cut it short. Those become visible escapes (``\\n``, ``\\x00``,
    ``\\u202e``); letters of any script and emoji are left alone. A name longer than ``width``
    keeps its start and end around ``…`` (``width=None``: never). Every text output prints
    names through it; ``--json`` keeps the exact name.

    >>> display_name("data\\nload\\x00er"), display_name("x" * 200, width=9)
    ('data\\\\nload\\\\x00er', 'xxxxx…xxx')
    >>> display_name("étape 🚀")
    'étape 🚀'
    """
    if width is not None and (isinstance(width, bool) or not isinstance(width, int) or width < 2):
        raise ValueError(f"width must be an int >= 2 or None, got {width!r}")
    text = _UNPRINTABLE.sub(_escape, name if isinstance(name, str) else str(name))
    if width is None or len(text) <= width:
        return text
    head = (width - 1) * 2 // 3
    return text[:head] + "…" + text[len(text) - (width - 1 - head) :]
