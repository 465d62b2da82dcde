"""`report.html`: a run folder as one self-contained page (scores, operators, charts, rounds).

Contract:
- `write_report(run_dir) -> Path` reads the run folder (`model.load_run`), renders it
  (`render.render_html`) and writes `run_dir/report.html` atomically. It reads only files in the
  folder and never changes them, so it can be run again on an old run (`python -m agent.logs RUN
  --html`).
- `write_report_quietly(run_dir)` is the same for the end of a run (completed, interrupted or
  crashed): a report that cannot be written is logged, never raised, so it cannot cost the run.
- The page needs no network: CSS, SVG charts and a small script are inline; a Content Security
  Policy lets only that script run.
"""

from __future__ import annotations

import logging
from pathlib import Path

REPORT_FILE = "report.html"

log = logging.getLogger(__name__)


def write_report(run_dir: str | Path) -> Path:
    from agent.report_html.model import load_run
    from agent.report_html.render import render_html
    from evaluator.reports.runfolder import write_text

    run_dir = Path(run_dir)
    path = run_dir / REPORT_FILE
    write_text(path, render_html(load_run(run_dir)))
    return path


def write_report_quietly(run_dir: str | Path | None) -> Path | None:
    if run_dir is None:
        return None
    try:
        return write_report(run_dir)
    except Exception:  # the report is a view of the run: it must never fail the run itself
        log.warning("could not write %s in %s", REPORT_FILE, run_dir, exc_info=True)
        return None
