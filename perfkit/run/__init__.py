"""The run directory: what a run measured, written as it goes (``RunWriter``) and read back.

with perfkit.window("val", epoch=0, run=RunWriter("runs/exp1")) as w:
    for batch in w.iterate(loader):
        ...
read_run("runs/exp1").windows[0].metric("step_ms_p95")
find_runs("lightning_logs")[0]            # the newest run directory below a folder
read_run("runs/exp1").trials              # loader trials recorded there (TrialResult: perfkit.trial)
"""

from .._formats import RUN_FORMAT as FORMAT
from ..loaders import TrialResult, TrialSetting
from ._find import find_runs
from ._jobs import RunJob
from ._reader import RunData, RunInterval, RunTrace, RunWindow, read_run
from ._writer import RunWriter, describe_os_error, file_stem, this_job

__all__ = [
    "FORMAT",
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
    "read_run",
    "this_job",
]
