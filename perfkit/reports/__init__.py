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
from . import text
from ._chrome import write_chrome_trace
from ._upload import attach_report_to_wandb, log_report_to_mlflow
from .html import render_html, write_html_report
from .text import *  # noqa: F403 (every text renderer: text's own __all__, below)

__all__ = [
    "attach_report_to_wandb",
    "format_seconds",
    "log_report_to_mlflow",
    "render_html",
    "write_chrome_trace",
    "write_html_report",
]
__all__ += text.__all__
