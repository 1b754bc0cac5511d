"""The report files a run or `preflight report` asked for, each written atomically from the
report, and the GitHub step summary."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Optional

from preflight.common import safewrite
from preflight.common.secrets import scrub
from preflight.model.report import Report
from preflight.report import html, jsonreport, junit, markdown


@dataclass(frozen=True)
class ReportFiles:
    """Where each report goes; None: not written."""

    json: Optional[str] = None
    junit: Optional[str] = None
    markdown: Optional[str] = None
    html: Optional[str] = None
    step_summary: bool = True  # append the Markdown to $GITHUB_STEP_SUMMARY when it is set

    def outputs(self) -> dict[str, Optional[str]]:
        """Returns {flag: path}, for checking their directories before a run."""
        return {"--json": self.json, "--junit": self.junit, "--markdown": self.markdown,
                "--html": self.html}


def write(files: ReportFiles, report: Report, doc: Optional[dict[str, Any]] = None) -> None:
    """Writes the report files asked for (each atomically) and the GitHub step summary. doc:
    the JSON document report was read from, whose keys the types do not know are kept."""
    # Every format is written from the report with its secrets hidden (common/secrets.py):
    # reports get shared.
    report, doc = scrub(report), None if doc is None else scrub(doc)
    fail_on = report.fail_on or "fail"
    if files.json:
        jsonreport.write_atomic(files.json, jsonreport.encode(report, doc))
    renderers: tuple[tuple[Optional[str], Callable[[Report], str]], ...] = (
        (files.junit, lambda r: junit.render(r, fail_on)),
        (files.markdown, markdown.render), (files.html, html.render))
    for path, render in renderers:
        if path:
            jsonreport.write_text_atomic(path, render(report))
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if summary and files.step_summary:
        # GitHub Actions shows this file on the run's page; appending is its protocol.
        try:
            with safewrite.open_append(summary) as fh:
                fh.write(markdown.render(report))
        except OSError as e:
            print(f"preflight: warning: GITHUB_STEP_SUMMARY {summary}: {e.strerror}",
                  file=sys.stderr)
        except safewrite.UnsafeWrite as e:
            print(f"preflight: warning: GITHUB_STEP_SUMMARY {e}", file=sys.stderr)
