"""The HTML report: a run directory as one self-contained page (inline CSS, matplotlib SVG plots).

    write_html_report("runs/exp1")      # RUN_DIR/report.html; or: perfkit report RUN_DIR

The page, its small HTML pieces, the plots and the profiler section each have a module here;
the section tree's rows are the text renderer's (``perfkit.reports.text``), so a number reads
the same on the page and in the terminal.
"""

from ._page import render_html, write_html_report

__all__ = ["render_html", "write_html_report"]
