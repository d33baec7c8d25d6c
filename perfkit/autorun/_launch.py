"""``perfkit run``'s launcher: run a command unchanged, with every Python process of it timed.

The command runs as a child process, so its exit code, its signals and ``torchrun``'s own
process tree behave as they do without perfkit. What makes its Python processes time
themselves is their environment: a temporary folder holding a ``sitecustomize.py``
(``SITECUSTOMIZE``) is put first on ``PYTHONPATH``, and ``PERFKIT_RUN_DIR`` names the run
directory. Python imports that module at start-up, in the script's process, in each
``torchrun`` worker, in DataLoader workers started by ``spawn``; it costs a check of the
environment and one import hook until torch is imported, and only then imports perfkit and
calls ``perfkit.autorun.autorun`` (which leaves alone the processes not to record). The hook
then imports the next ``sitecustomize`` on ``sys.path`` (a virtual environment's or a
distribution's own), as if it had never been there. Any failure of perfkit's is one line on
stderr, and the script runs unmonitored. ``python -I``, ``-E`` or ``-S`` ignore the hook.

Signals: SIGTERM and SIGHUP sent to ``perfkit run`` are passed to the command, and so is
SIGINT, unless the command is in the terminal's foreground process group (Ctrl-C in a
terminal reaches both processes already: passing it on would interrupt the command's own
clean-up a second time). The exit code is the command's, or 128 + N for a command killed by
signal N, as a shell reports it (130 for Ctrl-C).

Why not run the script inside this process (``runpy``): ``torchrun`` and ``python -m``
commands, scripts that call ``os._exit`` or change signal handlers, and a crash in native
code would all take the diagnosis down with them. Here the child writes each window as it
ends, and this process reads the run directory when the child is gone, whatever its end.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import FrameType

from ..names import RUN_DIR_ENV

SITECUSTOMIZE = f'''"""perfkit run's start-up hook (a temporary file): times this process once torch is in."""
import os
import sys


class _PerfkitAfterTorch:
    """Finds ``torch`` like the next finder would, and calls perfkit once torch has run."""

    def find_spec(self, name, path=None, target=None):
        if name != "torch":
            return None
        sys.meta_path.remove(self)
        import importlib.util

        spec = importlib.util.find_spec(name)
        loader = getattr(spec, "loader", None)
        if loader is not None and hasattr(loader, "exec_module"):
            run = loader.exec_module

            def exec_module(module):
                run(module)
                _perfkit_start()

            loader.exec_module = exec_module
        return spec


def _perfkit_start():
    try:
        from perfkit.autorun import autorun

        autorun(os.environ["{RUN_DIR_ENV}"])
    except Exception as exc:
        sys.stderr.write(f"perfkit run: cannot time this process ({{type(exc).__name__}}: {{exc}}); "
                         "it runs unmonitored\\n")


def _perfkit_chain():
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if p != here]
    me = sys.modules.pop("sitecustomize")  # the import system takes the module back from there
    try:
        import sitecustomize  # noqa: F401 - the one this file stood in front of
    except ImportError as exc:
        if exc.name != "sitecustomize":
            raise
    finally:
        sys.modules.setdefault("sitecustomize", me)


if os.environ.get("{RUN_DIR_ENV}") and os.environ.get("RANK", "0") in ("", "0"):
    sys.meta_path.insert(0, _PerfkitAfterTorch())
_perfkit_chain()
'''


class LaunchError(Exception):
    """The command could not be started (not found, not executable); ``code`` is what a shell exits with."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


def command_line(command: Sequence[str]) -> list[str]:
    """The argv to run: ``command`` as given, or this Python before a script named first.

    >>> command_line(["train.py", "--lr", "0.1"])[1:]
    ['train.py', '--lr', '0.1']
    >>> command_line(["torchrun", "--nproc_per_node", "2", "train.py"])[0]
    'torchrun'
    """
    argv = list(command)
    if argv and argv[0].endswith(".py") and not os.access(argv[0], os.X_OK):
        return [sys.executable, *argv]
    return argv


def launch(command: Sequence[str], run_dir: Path) -> int:
    """Run ``command`` with its Python processes timed into ``run_dir``; returns its exit code."""
    argv = command_line(command)
    with tempfile.TemporaryDirectory(prefix="perfkit-run-") as boot:
        Path(boot, "sitecustomize.py").write_text(SITECUSTOMIZE, encoding="utf-8")
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([boot, *filter(None, [env.get("PYTHONPATH")])])
        env[RUN_DIR_ENV] = str(run_dir.resolve())
        try:
            child = subprocess.Popen(argv, env=env)
        except FileNotFoundError as exc:
            raise LaunchError(f"cannot run {argv[0]!r}: command not found", 127) from exc
        except PermissionError as exc:
            raise LaunchError(f"cannot run {argv[0]!r}: permission denied", 126) from exc
        with _passing_signals(child):
            code = child.wait()
    return 128 - code if code < 0 else code


@contextlib.contextmanager
def _passing_signals(child: subprocess.Popen[bytes]) -> Iterator[None]:
    def pass_on(signum: int, frame: FrameType | None) -> None:
        if signum == signal.SIGINT and _in_foreground(child.pid):
            return  # the terminal sent it to the command too
        with contextlib.suppress(ProcessLookupError):
            child.send_signal(signum)

    signals = [signal.SIGINT, signal.SIGTERM, signal.SIGHUP]
    before = {s: signal.signal(s, pass_on) for s in signals}
    try:
        yield
    finally:
        for s, handler in before.items():
            signal.signal(s, handler)


def _in_foreground(pid: int) -> bool:
    """Whether process ``pid`` is in the foreground process group of this process's terminal."""
    try:
        fd = os.open("/dev/tty", os.O_RDONLY | os.O_NOCTTY)
    except OSError:
        return False  # no terminal: nobody else sends it
    try:
        return os.tcgetpgrp(fd) == os.getpgid(pid)
    except OSError:
        return False
    finally:
        os.close(fd)
