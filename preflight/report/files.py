"""The report files a run or `preflight report` asked for, each written atomically from the
JSON document, and the GitHub step summary."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Optional

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


def write(files: ReportFiles, doc: Mapping[str, Any]) -> None:
    """Writes the report files asked for (each atomically) and the GitHub step summary."""
    fail_on = doc.get("fail_on") or "fail"
    if files.json:
        jsonreport.write_atomic(files.json, dict(doc))
    for path, render in ((files.junit, lambda d: junit.render(d, fail_on)),
                         (files.markdown, markdown.render), (files.html, html.render)):
        if path:
            jsonreport.write_text_atomic(path, render(doc))
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if summary and files.step_summary:
        # GitHub Actions shows this file on the run's page; appending is its protocol.
        try:
            with open(summary, "a", encoding="utf-8") as fh:
                fh.write(markdown.render(doc))
        except OSError as e:
            print(f"preflight: warning: GITHUB_STEP_SUMMARY {summary}: {e.strerror}",
                  file=sys.stderr)
