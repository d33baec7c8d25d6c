"""The run directory: what a run measured, written as it goes (``RunWriter``) and read back.

with perfkit.window("val", epoch=0, run=RunWriter("runs/exp1")) as w:
    for batch in w.iterate(loader):
        ...
read_run("runs/exp1").windows[0].metric("step_ms_p95")
find_runs("lightning_logs")[0]            # the newest run directory below a folder
readable_run("lightning_logs")            # what perfkit summary reads: the newest run, read
read_run("runs/exp1").trials              # loader trials recorded there (TrialResult: perfkit.trial)
"""

from .._formats import RUN_FORMAT as FORMAT
from ..loaders import TrialResult, TrialSetting
from ._data import RunData, RunInterval, RunTrace, RunWindow
from ._files import describe_os_error, write_atomically
from ._find import find_runs, locate_run, readable_run
from ._jobs import RunJob, this_job
from ._layout import REPORT_FILE, VERDICTS_FILE, WINDOWS_FILE, file_stem
from ._reader import read_run
from ._writer import RunWriter

__all__ = [
    "FORMAT",
    "REPORT_FILE",
    "VERDICTS_FILE",
    "WINDOWS_FILE",
    "RunData",
    "RunInterval",
    "RunJob",
    "RunTrace",
    "RunWindow",
    "RunWriter",
    "TrialResult",
    "TrialSetting",
    "describe_os_error",
    "file_stem",
    "find_runs",
    "locate_run",
    "read_run",
    "readable_run",
    "this_job",
    "write_atomically",
]
