"""``autorun``: this process's session under ``perfkit run``, driven by its DataLoader loops.

Windows go to the run directory through the session's ``RunWriter`` as each ends (so a process
killed mid-run leaves every finished one); at exit the open loops are closed and ``final.json``
is written. Diagnosing is left to the ``perfkit run`` process, from what is on disk. The user's
own ``section``/``@timed`` marks land in the windows (one default registry).

Only one process of a job records: ranks other than 0 of a ``torchrun`` job (no gather in
zero-code mode: a collective perfkit adds could deadlock a job whose ranks see different batch
counts; rank 0's windows are rank 0's alone) and DataLoader worker processes are left alone.
"""

from __future__ import annotations

import atexit
import os
from pathlib import Path

from .._registry import Registry
from ..monitor import Host, Options, Session

SAMPLE_INTERVAL_S = 0.1
"""How often memory is sampled while a loop runs (a daemon thread)."""
_STARTED: list[Session] = []  # this process's session, once started


def autorun(run_dir: str | os.PathLike[str], *, registry: Registry | None = None) -> bool:
    """Time every DataLoader iteration of this process into the run directory ``run_dir`` (see the
    module docstring); False where this process is not the one to record (a rank other than 0,
    a DataLoader worker). Calling it again does nothing.

    >>> import perfkit.autorun
    >>> callable(perfkit.autorun.autorun)
    True
    """
    from torch.utils.data import get_worker_info

    from ..torch import follow_loaders

    if _STARTED:
        return True
    if os.environ.get("RANK", "0") not in ("", "0") or get_worker_info() is not None:
        return False
    world = int(os.environ.get("WORLD_SIZE", "1") or 1)
    # no interval windows (yet): a warm-up cut at each epoch's tenth step costs a short epoch's
    # window milliseconds of snapshot (docs/run.md); the CLI diagnoses whole epochs
    options = Options(
        registry=registry,
        run_dir=Path(run_dir),
        console=False,
        sample_interval_s=SAMPLE_INTERVAL_S,
        intervals=False,
    )
    host = Host(meta={"framework": "perfkit run", "rank": 0, "world_size": world})
    session = Session(options, host)
    _STARTED.append(session)
    follower = follow_loaders(session)
    pid = os.getpid()

    def at_exit() -> None:
        if os.getpid() != pid or not follower.ok:
            return
        follower.close()
        follower.guard(lambda: _say_own_records(session))
        follower.guard(lambda: session.finish(diagnose=False))

    atexit.register(at_exit)
    return True


SHOWN = 5
"""Series named when a script timed its own loop but iterated no DataLoader."""


def _say_own_records(session: Session) -> None:
    """No DataLoader was followed, yet the script timed things itself (``timed_iter``, sections):
    say what, and how its loop becomes a stage (nothing was lost: no stage epoch held them)."""
    if session.monitor is None or session.monitor.last_metrics:
        return
    names = sorted(session.registry.snapshot())
    if not names:
        return
    shown = ", ".join(names[:SHOWN]) + (f" and {len(names) - SHOWN} more" if len(names) > SHOWN else "")
    session.host.say(
        f"perfkit run: the script timed {len(names)} series itself ({shown}) but iterated no "
        "DataLoader, so no stage epoch holds them: wrap its loop in perfkit.window('train', "
        "epoch=epoch) and iterate w.iterate(batches) to get the account and the verdicts"
    )
