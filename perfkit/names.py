"""perfkit's vocabulary: every series, part, mark and metadata name that one module writes and another reads.

Writers (entry points, loaders, the stage recorder, the profiler tracer) and readers (stage
metrics, findings, the report, the trace analyser, the Lightning integration) all import
their names from here, so a name is spelled once. Two neighbours are re-exported here, where
they are public: the naming of a stage's several loaders (``loader_name``: ``perfkit._loader_names``)
and the escaping of a user's names for text (``display_name``: ``perfkit._display``).

A *stage* is one of ``STAGES`` (a loop over a data set: training, validation, test,
prediction); a *loader* is named after the stage that iterates it (of several in one stage, the
``k``-th from the second on is ``STAGE/k``: ``loader_name``), or freely in a plain script.
Records of a stage epoch:

==========================  ===========================================================
``STAGE.step``              the step's own compute, one record per batch
``LOADER.data.wait``        how long each ``next()`` on the loader blocked
``LOADER.data.iter``        ``iter()`` on the loader (starting DataLoader workers)
``LOADER.data.end``         the loader's last ``next()``, which said it was done (workers shut down)
``LOADER.data.sampler``     inside a wait, in this process: the sampler (``.make``, ``.receive``,
                            ``.pin``: ``WAIT_PARTS``)
``LOADER.data.handle``      inside ``.receive``: one shared-memory handle (a tensor's storage) opened
                            (``RECEIVE_HANDLE``)
``LOADER.data.fetch``       each batch's time in its DataLoader worker
``LOADER.data.fetch_cpu``   each batch's CPU time in its worker (a record that long; ``.fetch_queued``:
                            its time there ready to run but waiting for a core, on Linux)
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
``dist.wait.PART.COLL``     one collective's exposed wait: the time the rank was held by it (a
                            synchronous call's, or its ``Work.wait()``'s; on CUDA the waiting
                            stream's), in the step part ``PART`` it fell in (``COLLECTIVE_PARTS``),
                            by collective ``COLL`` (``COLLECTIVES``); gauge ``dist.bytes.COLL``: the
                            bytes of each (``perfkit.torch.time_collectives``)
``dist.grad_wait``          one per DDP step: how long the rank waited for its gradient all-reduce
                            past its own backward (``perfkit.torch.time_gradient_sync``); inside
                            ``STAGE.step``, and the account's overlay ``sync_wait``
``sync.stall.SITE``         the host blocked on the device in a synchronizing call made at ``SITE``
                            (``file:line``): ``.item()``, ``.cpu()``, ``torch.cuda.synchronize()``
                            (``perfkit.torch.watch_syncs``)
``sync.untimed.SITE``       a synchronizing call at ``SITE`` that CUDA's sync debug mode reported
                            but no timed entry point saw: counted, its duration unknown (0)
``h2d.copy``                a batch's copy to the device, host time (``perfkit.torch.time_copy``);
                            ``h2d.copy.gpu`` its time on the stream; gauges ``h2d.bytes`` and
                            ``h2d.pinned_bytes`` per copy
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
the seconds of ``step`` spent waiting for the other ranks in DDP's gradient all-reduce,
``collective_wait`` those held by the collectives timed at their Python entry points (FSDP's
all-gathers and reduce-scatters, a script's all-reduce), so ``step`` less both is the rank's own
compute (``ACCOUNT_OVERLAYS``).

The words of perfkit's public names, one meaning each (docs/design.md "Names" lists them with
the names that use them; any other word in a public name means what it means in English):

================  ==================================================================================
word              means
================  ==================================================================================
record            one timing: the node it was made at (a name inside its parents), its start and its
                  end, in integer nanoseconds of the registry's clock
series            the records of one name (a section, ``STAGE.step``, ``LOADER.data.wait``): a
                  bounded ring of the newest and exact running totals
section           a named block or function whose calls are timed (``section``, ``@timed``);
                  sections nest into a tree with self time
registry          where records go: bounded, thread-safe, one per process unless another is given
cursor            a point in a registry's records: where a window starts
window            a span whose records are cut out as one snapshot, and nothing else: the records
                  since a cursor; a stage epoch's (``StageWindow``, from a script
                  ``perfkit.window``'s ``ScriptWindow``, in a run directory a ``RunWindow``); an
                  interval's; a profiler window's traced steps
snapshot          the records of a window, immutable and mergeable: exact counts and totals,
                  percentiles from the samples the rings kept, the section tree, gauges
stats             a series' statistics in a snapshot: count, total, mean, median, p95, p99, std,
                  min, max
gauge             a sampled value rather than a duration: memory, CPU seconds, a loader's settings
sampler           a thread sampling gauges from its sources (the process, NVML, torch.cuda) every
                  ``interval_s``; one is leased per registry
hot path          the code every record runs through: compiled (C) or pure Python, giving the same
                  records
stage             a loop over a data set: train, val, test, predict (never "phase")
epoch             one pass of a stage over its data; a stage epoch is what perfkit accounts, reports
                  and judges, one window each
step              one batch of a stage: the loop's turn; its own compute is the series
                  ``STAGE.step``, in a trace one ``ProfilerStep#N`` range
loader            what a stage iterates for its batches (a DataLoader, any iterable), named after
                  its stage; of several in one stage the ``k``-th from the second on is ``STAGE/k``
worker            a DataLoader worker process, making batches for its loader
wait              time a loop spent blocked: on its loader's next batch (``data_wait``), or on the
                  other ranks (``sync_wait``, ``collective_wait``, ``dist.wait``)
fetch             a batch's making in a DataLoader worker
loop              a timed loop over a loader (``timed_iter``); a turn is one request for an item to
                  the next
part              a piece of a step's or a stage epoch's time. The account's parts: ``data_wait``,
                  ``step``, ``callbacks``, ``module_hooks``, ``loggers``, ``loader_setup``,
                  ``other``; a trace's: ``data_wait``, ``forward``, ``backward``, ``optimizer``,
                  ``other``, where ``forward`` + ``backward`` + ``optimizer`` are the pieces of
                  ``step`` a trace can see
account           a stage epoch's wall time split into parts that add up to it (per loader and per
                  rank too)
overlay           a measured piece inside one part, not adding to the wall time (``sync_wait``,
                  ``collective_wait`` in ``step``)
hook              time in another component's code during a stage: a callback's, a checkpoint
                  callback's, the model's own hooks, a logger's methods
zone              when in a stage epoch its unmeasured time (``other``) fell: before the first step,
                  between steps, after the last
segment           a stretch of a stage epoch in which its records count: an epoch paused around
                  another stage's (validation inside training) has several
interval          a piece of a stage epoch still running (N steps or T seconds), reported as it goes
                  with provisional verdicts; a sampler's ``interval_s`` is its period
scope             what a stage window spans: an epoch, an interval, or the warm-up steps before the
                  first interval
tag               a label a program attaches to the step in progress, kept with the slowest steps
metric            a flat number of a stage window, its unit last, under a prefix
                  (``perf/train/step_ms_p95``)
recorder          the one owner of a program's stage epochs: steps, hooks, pauses, and each epoch's
                  window and account
listener          what receives each stage window from the recorder (a monitor, profiler windows, a
                  script window)
monitor           the listener that publishes each stage window: metrics to sinks, the console
                  block, the verdicts
session           one monitored run assembled once: recorder, sampler lease, ranks, run writer and
                  monitor, driven by a framework (its host)
rank              one process of a distributed job; a stage epoch is merged over the ranks at its
                  end
merge             combining the windows of ranks or processes into one (exact up to ``EXACT_MAX``
                  ranks, sketches above); ``gather`` is the transport that brings each rank's part
straggler         the rank the others wait for
collective        one ``torch.distributed`` operation every rank of a group joins, named by what it
                  does (``all_gather``, ``reduce_scatter``, ``all_reduce``, ``broadcast``, ...); its
                  exposed wait is the time it held the rank (the part not overlapped with compute)
communication     a stage epoch's exposed waits in collectives: by step part, by collective, with
                  the bytes and calls per step
run               one execution of a training program; its run directory holds what it measured
                  (``perfkit run`` times a command unchanged)
job               one process writing a run directory: two given one directory write beside each
                  other
sink              one output path for stage windows: JSONL, W&B, MLflow, Prometheus, the run
                  directory
trial             a loader timed alone (no model) at each setting within a budget, and the setting
                  it picks
setting           one configuration of a DataLoader: ``num_workers``, ``prefetch_factor``,
                  ``persistent_workers``, ``pin_memory``, ``batch_size``
rule              one check of a stage epoch or a trace: its kind, what it reads, its threshold, its
                  judge
kind              a rule's name, in UPPER_SNAKE_CASE (``INPUT_BOUND``)
verdict           what a rule concludes: its kind, its share of the time, what it saw and what to do
                  (``perfkit.findings`` holds the run's rules; a trace analysis's findings are
                  verdicts too)
abstention        a rule that could not judge, and the signal it lacked
case              one stage epoch to judge, with what the rules compare it to
diagnosis         a run's verdicts, each owning its share of the run, ranked
severity          how much a verdict matters, by its share: high, medium or low
change            what differs beyond the noise, between two windows (``CHANGE``), runs
                  (``PartChange``) or traces (``TimeChange``); a verdict's ``change`` is the
                  settings it proposes
comparison        two runs side by side, part by part, each change held against its noise
timeline          a stage's intervals so far, and the changes seen in them
trace             a Chrome trace file: torch.profiler's, which ``perfkit.trace`` reads, or one
                  perfkit writes of a snapshot
profiler window   a few steps of chosen stage epochs traced by torch.profiler
mark              a range perfkit opens in a trace while a profiler window records, read back to
                  split its steps into parts
annotation        a range a program or library opens in a trace (``record_function``)
analysis          what a trace says: its parts per step, its ops, kernels, idle device time and
                  verdicts (per rank: ``RanksAnalysis``)
diff              two traces compared per step
stat              a row of a trace analysis: an op, a kernel, a section, an annotation, a transfer
report            a run directory's HTML page (``perfkit report``); ``perfkit.report`` renders a
                  snapshot as text
text              a renderer's output for the terminal or a log, several lines; a *line* is one
say               print or log one piece of perfkit's output to the user, clear of progress bars
preset            a Lightning callback of perfkit's first users, kept with its arguments, metric
                  keys and console lines
================  ==================================================================================

>>> step_series("val"), wait_series("val"), fetch_series("train")
('val.step', 'val.data.wait', 'train.data.fetch')
>>> part_label(DATA_WAIT), MARK_FORWARD
('data wait', 'perfkit.part.forward')
"""

from __future__ import annotations

from collections.abc import Iterable

# Where they are public: the escaping of names for text, and the naming of a stage's loaders.
from ._display import NAME_WIDTH as NAME_WIDTH
from ._display import display_name as display_name
from ._loader_names import LOADER_INDEX as LOADER_INDEX
from ._loader_names import loader_index as loader_index
from ._loader_names import loader_label as loader_label
from ._loader_names import loader_name as loader_name

STAGES = ("train", "val", "test", "predict")
"""The stages a training program runs, in the order a report lists them."""

STAGE_LABELS = {"train": "training", "val": "validation", "test": "testing", "predict": "prediction"}

DATA = ".data"
WAIT = DATA + ".wait"
ITER = DATA + ".iter"
END = DATA + ".end"
FETCH = DATA + ".fetch"
FETCH_CPU = DATA + ".fetch_cpu"
FETCH_QUEUED = DATA + ".fetch_queued"
TURN = ".loop.turn"
STEP = ".step"
HOOK = ".hook."
CHECKPOINT_HOOK = ".checkpoint."
MODULE_HOOK = ".module_hook."
LOGGER = ".logger."
LOADER_SETUP = ".loader_setup"
GPU = ".gpu"
RECURSION = ".recursion"

RUN_DIR_NAME = "perfkit-run"
"""The run directory's default folder name (under a log or output folder, or the working one).
Not an identifier on purpose: a folder named like the package (``perfkit``) shadows it for
``import perfkit`` in that working folder under an editable install."""

RUN_DIR_ENV = "PERFKIT_RUN_DIR"
"""The environment variable ``perfkit run`` hands its run directory to the command's processes in."""

DIST_WAIT = "dist.wait"
"""Prefix of each collective's exposed wait, ``dist.wait.PART.COLLECTIVE`` (``collective_series``):
free of any stage, it lands in the stage epoch whose window is open."""
DIST_BYTES = "dist.bytes"
"""Prefix of the gauge of each collective's bytes, ``dist.bytes.COLLECTIVE`` (``collective_bytes_gauge``)."""

GRAD_WAIT = "dist.grad_wait"
"""Each DDP step's wait for its gradient all-reduce past the rank's own backward: from the launch of
its last bucket to the completion of all of them (``perfkit.torch.time_gradient_sync``). Free of any
stage: it lands in the stage epoch whose window is open (training), inside its steps."""

SYNC_STALL = "sync.stall."
"""Prefix of a call site's timed synchronizations: ``sync.stall.train.py:42`` (``stall_series``).
A *sync stall* is the host blocked on the device; not the DDP ``sync_wait`` overlay."""
SYNC_UNTIMED = "sync.untimed."
"""Prefix of a call site's synchronizations seen but not timed (zero-length records: a count)."""
H2D_COPY = "h2d.copy"
"""A host-to-device copy of a batch: host time; ``h2d.copy.gpu`` its time on the stream."""
H2D_BYTES = "h2d.bytes"
"""Gauge: the bytes of each batch copied to the device."""
H2D_PINNED_BYTES = "h2d.pinned_bytes"
"""Gauge: the bytes of each copy that came from pinned (page-locked) host memory."""


def stall_series(site: str, *, timed: bool = True) -> str:
    """The series of the synchronizations made at ``site`` (``file:line``).

    >>> stall_series("train.py:42"), stall_site("sync.untimed.train.py:42")
    ('sync.stall.train.py:42', ('train.py:42', False))
    """
    return (SYNC_STALL if timed else SYNC_UNTIMED) + site


def stall_site(series: str) -> tuple[str, bool] | None:
    """(site, timed) of a ``stall_series`` name, None for another series."""
    if series.startswith(SYNC_STALL):
        return series[len(SYNC_STALL) :], True
    if series.startswith(SYNC_UNTIMED):
        return series[len(SYNC_UNTIMED) :], False
    return None


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


WAIT_PARTS = ("sampler", "make", "receive", "pin")
"""Where the main process spends a wait for a batch (``wait_part_series``): the sampler, making the
batch itself (no workers), rebuilding a worker's batch, pinning. The rest of the wait is
``WORKER_WAIT``: blocked until a worker's batch came."""
WORKER_WAIT = "worker"
RECEIVE_HANDLE = "handle"
"""Inside ``receive``: opening one shared-memory handle of a worker's batch (a tensor's storage: each
comes through its own file descriptor), one record each (``wait_part_series(loader, RECEIVE_HANDLE)``),
so their count per batch received is the storages a batch holds. Not a part: ``receive`` holds it."""
_WAIT_PART_SUFFIXES = tuple(f"{DATA}.{part}" for part in (*WAIT_PARTS, RECEIVE_HANDLE))


def wait_part_series(loader: str, part: str) -> str:
    """A part of ``loader``'s waits spent in this process (``WAIT_PARTS``), recorded inside them."""
    return f"{loader}{DATA}.{part}"


def end_series(loader: str) -> str:
    """The loader's last ``next()``, which raised ``StopIteration``: where a DataLoader without
    persistent workers shuts them down, while the loop still waits on it."""
    return loader + END


def fetch_cpu_series(loader: str) -> str:
    """Each batch's CPU time in its DataLoader worker: a record as long as that CPU time, from the
    batch's start (beside ``fetch_series``, its wall time)."""
    return loader + FETCH_CPU


def fetch_queued_series(loader: str) -> str:
    """Each batch's time in its DataLoader worker spent ready to run but waiting for a core (the
    kernel's run-queue delay, Linux's ``/proc/thread-self/schedstat``): a record that long, from the
    batch's start. With ``fetch_cpu_series`` it tells a worker that computes on a crowded machine
    (little CPU, much queueing) from one that waits on I/O (little of either)."""
    return loader + FETCH_QUEUED


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


def step_part_series(stage: str, part: str) -> str:
    """A part of ``stage``'s steps (``STEP_PARTS``): its own time in each step, one record a step."""
    return f"{stage}{STEP}.{part}"


def optimizer_series(stage: str) -> str:
    """The optimizer's step inside ``stage``'s steps: its part (one record a step it ran in, so
    one per gradient-accumulation cycle)."""
    return step_part_series(stage, OPTIMIZER)


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


def is_stage_series(name: str) -> bool:
    """Whether ``name`` is one of perfkit's own stage or loader series (not a user's section).

    >>> [is_stage_series(n) for n in ("val.data.wait", "val.hook.Checkpoint", "train.step.rest", "collate")]
    [True, True, True, False]
    """
    if name == GRAD_WAIT or name.startswith((DIST_WAIT + ".", DIST_BYTES + ".")):
        return True
    if name.endswith((STEP, WAIT, ITER, END, FETCH, FETCH_CPU, FETCH_QUEUED, TURN, LOADER_SETUP)):
        return True
    if (
        name.endswith(_PART_SUFFIXES)
        or name.endswith(_WAIT_PART_SUFFIXES)
        or name.endswith(_PART_GPU_SUFFIXES)
    ):
        return True
    if name.startswith((H2D_COPY, SYNC_STALL, SYNC_UNTIMED)):  # the GPU account's, not the user's
        return True
    return any(name.startswith(stage + kind) for stage in STAGES for kind in HOOK_KINDS.values())


DATA_WAIT = "data_wait"
FORWARD = "forward"
BACKWARD = "backward"
OPTIMIZER = "optimizer"
ZERO_GRAD = "zero_grad"
REST = "rest"
CALLBACKS = "callbacks"
MODULE_HOOKS = "module_hooks"
LOGGERS = "loggers"
CHECKPOINT = "checkpoint"  # not a part: the subject of ``callbacks`` that saves checkpoints
OTHER = "other"
STEP_PART = "step"  # STEP and LOADER_SETUP above are the series' suffixes
STEP_GPU = "step_gpu"
"""The account's subject of the step's parts' GPU time, by CUDA events (``perfkit.stages.DeviceParts``):
``STAGE.step.PART.gpu`` summed per part."""
LOADER_SETUP_PART = "loader_setup"

ACCOUNT_PARTS = (DATA_WAIT, STEP_PART, CALLBACKS, MODULE_HOOKS, LOGGERS, LOADER_SETUP_PART, OTHER)
"""The parts of a stage epoch's account, in the order a report stacks them."""

STEP_PARTS = (FORWARD, BACKWARD, OPTIMIZER, ZERO_GRAD)
"""The measured parts of a step (``STAGE.step.PART``); what none of them claims is ``REST``: the
account's ``step`` subjects are these and ``rest``, adding up to the step (``perfkit.stages.StepParts``)."""
_PART_SUFFIXES = tuple(f"{STEP}.{part}" for part in (*STEP_PARTS, REST))  # the parts and the rest
_PART_GPU_SUFFIXES = tuple(s + GPU for s in (STEP, *_PART_SUFFIXES))  # the step's, its parts' GPU time

FLOPS_PER_STEP = "perfkit.flops_per_step"
"""A gauge of every stage epoch's window where a step's FLOPs are known (counted once, or stated)."""
PEAK_FLOPS = "perfkit.peak_flops"
"""A gauge of every stage epoch's window where the device's dense peak (FLOP/s) is known (MFU's
denominator)."""

SYNC_WAIT = "sync_wait"
COLLECTIVE_WAIT = "collective_wait"
COMPUTE = "compute"  # not a part: ``step`` less its waits for the others, where they were measured

ACCOUNT_OVERLAYS = {SYNC_WAIT: STEP_PART, COLLECTIVE_WAIT: STEP_PART}
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


# Profiler marks: ranges perfkit opens in a torch.profiler trace while a profiler window records,
# and that ``perfkit.trace`` reads back to split each step into parts.
MARK_PREFIX = "perfkit.part."
MARK_DATA_WAIT = MARK_PREFIX + DATA_WAIT
MARK_FORWARD = MARK_PREFIX + FORWARD
MARK_BACKWARD = MARK_PREFIX + BACKWARD
MARK_OPTIMIZER = MARK_PREFIX + OPTIMIZER


def part_label(part: str) -> str:
    """A part's name in text: ``"data_wait"`` -> ``"data wait"``."""
    return part.replace("_", " ")


TRACE_METADATA_KEY = "perfkit"
"""Top-level key of a Chrome trace written in a profiler window: ``{"sections": [...]}``."""


COLLECTIVES = (
    "all_gather",
    "reduce_scatter",
    "all_reduce",
    "broadcast",
    "all_to_all",
    "reduce",
    "gather",
    "scatter",
    "barrier",
)
"""The collectives by what they do (each of ``torch.distributed``'s forms -- ``all_gather_single``,
``all_gather_into_tensor``, ``all_gather_object``, ... -- is one of these)."""
OUTSIDE = "outside"
"""Where a collective waited outside every step (an epoch's end, a callback between steps)."""
COLLECTIVE_PARTS = (*STEP_PARTS, REST, OUTSIDE)
"""Where a collective's wait fell: a step's part (``rest``: in a step, in no part), or ``outside``."""


def collective_series(part: str, collective: str) -> str:
    """The exposed waits of ``collective`` in step part ``part`` (``COLLECTIVE_PARTS``).

    >>> collective_series("forward", "all_gather"), collective_of("dist.wait.backward.reduce_scatter")
    ('dist.wait.forward.all_gather', ('backward', 'reduce_scatter'))
    """
    return f"{DIST_WAIT}.{part}.{collective}"


def collective_of(series: str) -> tuple[str, str] | None:
    """(part, collective) of a ``collective_series`` name, None for another series."""
    if not series.startswith(DIST_WAIT + "."):
        return None
    part, _, collective = series[len(DIST_WAIT) + 1 :].partition(".")
    return (part, collective) if collective else None


def collective_bytes_gauge(collective: str) -> str:
    """The gauge of each ``collective``'s bytes: one sample per call (its count is the calls).

    >>> collective_bytes_gauge("reduce_scatter")
    'dist.bytes.reduce_scatter'
    """
    return f"{DIST_BYTES}.{collective}"
