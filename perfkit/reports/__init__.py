"""Reports of a run: the self-contained HTML page, the console summary, terminal text, Chrome
traces, uploads.

    write_html_report("lightning_logs/version_0/perfkit")     # or: perfkit report RUN_DIR
    attach_report_to_wandb(path); log_report_to_mlflow(path)
    print(analysis_text(perfkit.trace.analyze_trace("trace.json.gz")))   # or: perfkit analyze
    write_chrome_trace("epoch.json.gz", snapshot)             # for Perfetto, chrome://tracing

Each output form has one home: every text renderer is in ``perfkit.reports.text``, the HTML
page in ``perfkit.reports.html``, the Chrome trace in ``_chrome``; they read the same result
objects, and every number is written by the same formatter. (``perfkit.report(snapshot)`` is
``snapshot_text``, ``perfkit.write_chrome_trace`` is ``write_chrome_trace``.)
"""

from .._units import format_seconds
from ._chrome import write_chrome_trace
from ._upload import attach_report_to_wandb, log_report_to_mlflow
from .html import render_html, write_html_report
from .text import (
    analysis_text,
    comparison_text,
    diagnosis_text,
    diff_text,
    interval_line,
    performance_line,
    provisional_text,
    ranked_verdicts_text,
    ranks_text,
    series_line,
    snapshot_text,
    summary_text,
    throughput_line,
    trial_text,
    warmup_text,
)

__all__ = [
    "analysis_text",
    "attach_report_to_wandb",
    "comparison_text",
    "diagnosis_text",
    "diff_text",
    "format_seconds",
    "interval_line",
    "log_report_to_mlflow",
    "performance_line",
    "provisional_text",
    "ranked_verdicts_text",
    "ranks_text",
    "render_html",
    "series_line",
    "snapshot_text",
    "summary_text",
    "throughput_line",
    "trial_text",
    "warmup_text",
    "write_chrome_trace",
    "write_html_report",
]
