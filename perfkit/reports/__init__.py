"""Reports of a run: the self-contained HTML page, its plots, the console summary, uploads.

    write_html_report("lightning_logs/version_0/perfkit")     # or: perfkit report RUN_DIR
    attach_report_to_wandb(path); log_report_to_mlflow(path)

(``perfkit.report(snapshot)`` is the plain-text table of one snapshot.)
"""

from .._units import format_seconds
from ._page import render_html, write_html_report
from ._summary import series_line, summary_text
from ._text import comparison_text, diagnosis_text
from ._upload import attach_report_to_wandb, log_report_to_mlflow

__all__ = [
    "attach_report_to_wandb",
    "comparison_text",
    "diagnosis_text",
    "format_seconds",
    "log_report_to_mlflow",
    "render_html",
    "series_line",
    "summary_text",
    "write_html_report",
]
