"""Every text renderer of perfkit, each over a result object; numbers are written by ``perfkit._units``.

    snapshot_text(snapshot)              # perfkit.report: the section tree of a snapshot
    summary_text(window, metrics)        # the console block of a stage epoch
    provisional_text / interval_line     # an interval of an epoch still running (its first / the rest)
    diagnosis_text(run, diagnosis)       # perfkit summary
    comparison_text(comparison)          # perfkit compare
    analysis_text(analysis)              # perfkit analyze TRACE
    ranks_text(ranks)                    # perfkit analyze DIR (one trace per rank)
    diff_text(diff)                      # perfkit diff A B
    performance_line / throughput_line   # the Lightning presets' console lines
    trial_text(result)                   # perfkit trial: a loader's settings, timed alone

``perfkit.reports`` exports them all; the HTML page is ``perfkit.reports.html``.
"""

from ._analysis import analysis_text
from ._comparison import comparison_text
from ._console import series_line, summary_text
from ._diagnosis import diagnosis_text, ranked_verdicts_text
from ._diff import diff_text
from ._intervals import interval_line, provisional_text, warmup_text
from ._presets import performance_line, throughput_line
from ._ranks import ranks_text
from ._snapshot import snapshot_text
from ._trial import trial_text

__all__ = [
    "analysis_text",
    "comparison_text",
    "diagnosis_text",
    "diff_text",
    "interval_line",
    "performance_line",
    "provisional_text",
    "ranked_verdicts_text",
    "ranks_text",
    "series_line",
    "snapshot_text",
    "summary_text",
    "throughput_line",
    "trial_text",
    "warmup_text",
]
