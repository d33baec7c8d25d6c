"""A monitored run, assembled once: what every way of driving perfkit reports a run with.

    session = Session(Options(run_dir="runs/exp1"), Host(say=log.info, rank=rank, world=world))
    session.begin("train", epoch)                 # the framework's events, translated
    session.recorder.step_begin("train"); ...; session.recorder.step_end("train", batch=batch)
    session.end("train")                          # metrics to every sink, the console block
    session.finish()                              # verdicts.json, the run's ranked verdicts

``Options`` are the arguments every adapter shares (``perfkit_lightning.PerfMonitor``,
``perfkit_hf.PerfkitCallback``), declared and checked here once. A ``Session`` owns the stage
recorder, the resource sampler's lease, the ranks' transport, the run directory's writer and the
``StageMonitor`` that publishes each window; a ``Host`` is what the framework gives it.
``perfkit.window`` (a ``ScriptWindow`` of the ``script_run``) is a script's session; the
Lightning and Hugging Face callbacks and ``perfkit run`` build theirs from their own events.
"""

from ._console import console_logger, say_through
from ._monitor import Say, StageMonitor
from ._options import Options
from ._script import ScriptRun, ScriptWindow, script_run
from ._session import Host, Session, say_in_script

__all__ = [
    "Host",
    "Options",
    "Say",
    "ScriptRun",
    "ScriptWindow",
    "Session",
    "StageMonitor",
    "console_logger",
    "say_in_script",
    "say_through",
    "script_run",
]
