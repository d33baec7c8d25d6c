"""The run directory's layout: the name of every file in it, spelled once for all who read or write it
(``RunWriter``, ``read_run``, ``find_runs``, the command line, the verdict store, the HTML report).

    RUN_DIR/
      run.json            format (RUN_FORMAT), perfkit version, start time, metadata, jobs, lost windows
      windows.jsonl       one line per stage epoch: stage, epoch, metric prefix, metrics, wall time,
                          samples, account, ranks, slowest steps, and where its snapshot is
      windows/*.json      the snapshot of each of those windows (Snapshot.to_dict)
      intervals.jsonl     one line per interval of a long stage epoch (no snapshot; bounded: _intervals)
      traces.jsonl        one line per profiler window: its trace file and its analysis
      trials.jsonl        one line per loader trial (``perfkit.trial``): each setting's batches/s
      final.json          the snapshot of the whole run, written when the run ends
      verdicts.json       the run's diagnosis (``perfkit.findings.write_diagnosis``)
      report.html         its HTML report (``perfkit report``)
      .lock               the ``flock`` that serialises jobs' updates of ``run.json``

A folder is a run directory when it holds ``windows.jsonl``. Of several jobs writing one
directory, the first writes the files above; each later one writes its own ``final``,
``intervals``, ``verdicts`` and ``report`` beside them under its id (``own``), and shares the rest,
every line carrying its job.

>>> own(FINAL_FILE, "_4121-9f2c"), own(FINAL_FILE, "")
('final_4121-9f2c.json', 'final.json')
"""

from __future__ import annotations

import re

RUN_FILE = "run.json"
WINDOWS_FILE = "windows.jsonl"
SNAPSHOTS_DIR = "windows"
INTERVALS_FILE = "intervals.jsonl"
TRACES_FILE = "traces.jsonl"
TRIALS_FILE = "trials.jsonl"
FINAL_FILE = "final.json"
VERDICTS_FILE = "verdicts.json"
REPORT_FILE = "report.html"
LOCK_FILE = ".lock"

_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def own(name: str, suffix: str) -> str:
    """A job's own copy of file ``name``: ``suffix`` (``""`` for the directory's first job, else
    ``_`` and its id) before the extension. ``own(name, "*")`` is the pattern of every job's."""
    stem, dot, extension = name.partition(".")
    return f"{stem}{suffix}{dot}{extension}"


def job_suffix(job: str) -> str:
    """The suffix of the own files of ``job``, a job after the directory's first."""
    return f"_{file_stem(job)}"


def snapshot_file(name: str) -> str:
    """Where the snapshot of the window ``name`` (``val_epoch0``) goes, from the run directory."""
    return f"{SNAPSHOTS_DIR}/{name}.json"


def file_stem(name: str) -> str:
    """A name from the user (a stage) as a file name that stays in its folder.

    >>> file_stem("val"), file_stem("../../x")
    ('val', '______x')
    """
    return _UNSAFE.sub("_", name)[:80] or "_"
