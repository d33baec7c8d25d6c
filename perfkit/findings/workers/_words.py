"""The worker advice in words: the bounds, the reasons no change is proposed, the expected gain.

Each phrase is said once here and read by every proposal that needs it, so a bound reads the same
whether the gain model or a loader trial found it (``perfkit.reports`` renders verdicts; these are
the words inside a verdict's action).

    >>> gain_words((0.3, 0.45), 0.4)
    'expected gain 30%-45% of the epoch (12%-18% of the run)'
"""

from __future__ import annotations

import math

from ..._units import format_seconds, plural
from ._facts import MEMORY_SPARE, LoaderFacts
from ._model import max_workers, memory_binds

SPREAD_SAID = 1.1
"""A loop's mean time per batch past this multiple of its median is said beside it: the two
ends of the gain rest on them."""


def memory_words(f: LoaderFacts) -> str:
    """The memory bound in words: ``700 MB a worker (USS) against 2,000 MB free at the least, half
    of it kept spare``."""
    return (
        f"{f.worker_mb or 0:,.0f} MB a worker (USS) against {f.free_mb or 0:,.0f} MB free at the least, "
        f"{MEMORY_SPARE:.0%} of it kept spare"
    )


def cpu_words(f: LoaderFacts) -> str:
    """What a batch's CPU time says it is made by: ``; a batch is 96% CPU: computing`` (empty
    where the CPU split was not recorded)."""
    if f.batch_cpu_s is None:
        return ""
    kind = "computing" if f.computes else "waiting (disk, network, sleep), not computing"
    return f"; a batch is {f.batch_cpu_s / f.batch_s:.0%} CPU: {kind}" if f.batch_s > 0 else ""


def no_core(f: LoaderFacts) -> str:
    """No change, for the cores: the model's threads keep them busy, and a batch computes (a
    worker each needs a core) or the waiting workers running already take the cores left."""
    if f.computes:
        return (
            f"no change to the workers is proposed: the model's threads keep {f.model_cores:.1f} of "
            f"{plural(f.cores, 'core')} busy and a batch is made by computing{cpu_words(f)}, so more "
            "workers would take their cores from the model: the cores, not the worker count, are the limit"
        )
    return (
        f"no change to the workers is proposed: the model's threads keep {f.model_cores:.1f} of "
        f"{plural(f.cores, 'core')} busy{cpu_words(f)}, and the {plural(f.workers, 'worker')} running "
        "already take the rest: the cores, not the worker count, are the limit"
    )


def loop_words(f: LoaderFacts) -> str:
    """The loop's time per batch: ``10.86 ms of loop time``, with its mean where slow steps
    stretched it (``10.86 ms of loop time at the median step (mean 12.50 ms)``)."""
    said = f"{format_seconds(f.typical_loop_s)} of loop time"
    if f.loop_s > SPREAD_SAID * f.typical_loop_s:
        said += f" at the median step (mean {format_seconds(f.loop_s)})"
    return said


def unstable(f: LoaderFacts, found: str) -> str:
    """No gain, for an unstable loop: what was ``found`` at its median, without a gain."""
    return (
        f"no gain is stated: the loop's time per batch is unstable ({format_seconds(f.typical_loop_s)} at "
        f"the median step, {format_seconds(f.loop_s)} on average: the machine was busy at times, or some "
        f"steps do much more); at the median, {found} against {format_seconds(f.batch_s)} a batch: try it "
        "on a quiet machine and compare the epochs (perfkit compare)"
    )


def no_memory(f: LoaderFacts) -> str:
    """No change, for the memory: not one more worker fits."""
    return (
        f"no change to the workers is proposed: another worker would not fit in memory ({memory_words(f)}): "
        "memory, not the worker count, is the limit"
    )


def not_worth(f: LoaderFacts, k: int) -> str:
    """No change, for the noise: ``k`` workers would cost about what they save."""
    return (
        f"no change to the workers is proposed: the loader costs {format_seconds(f.batch_s)} a batch; "
        f"{plural(k, 'worker')} would cost about as much as {'it saves' if k == 1 else 'they save'} on "
        f"{plural(f.cores, 'core')}"
    )


def none_faster(f: LoaderFacts, now: float | None) -> str:
    """No change, from a trial: no setting it measured within the bounds beat the one set."""
    at = "" if now is None else f" ({now:.0f} batches/s at {f.workers})"
    within = (
        f"the free memory allows ({memory_words(f)})"
        if memory_binds(f, f.workers + 1)
        else f"the {plural(f.cores, 'core')} allow beside the model"
    )
    return (
        f"no change to the workers is proposed: a trial of the loader alone found no setting faster than "
        f"{f.workers} worker{'s' if f.workers != 1 else ''}{at} within the {max_workers(f)} {within}"
    )


def rate_words(need: float) -> str:
    """The rate the loop consumes batches at: ``120 batches/s``, or ``any rate`` for a loop with no
    body to hide a batch behind."""
    return "any rate" if math.isinf(need) else f"{need:.0f} batches/s"


def gain_words(gain: tuple[float, float] | None, weight: float) -> str:
    """The expected gain in words: ``expected gain 30%-45% of the epoch (12%-18% of the run)``."""
    if gain is None:
        return ""
    low, high = gain
    return f"expected gain {_span(low, high)} of the epoch ({_span(low * weight, high * weight)} of the run)"


def _span(low: float, high: float) -> str:
    return f"{low:.0%}" if round(low * 100) == round(high * 100) else f"{low:.0%}-{high:.0%}"
