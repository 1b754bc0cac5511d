"""The JSON report: the typed Report (model/report.py; report.build makes a run's) written
atomically as its document, and read back once into the same types, which every renderer
and action takes. One codec: encode writes, typed reads."""

from __future__ import annotations

import json
from typing import Any, Optional

from preflight.common import safewrite
from preflight.common.plain import facts_json
from preflight.common.plain import jsonable as jsonable  # the report's writer, shared
from preflight.config.errors import InputError, read_input
from preflight.config.typed import decode
from preflight.model.report import Report

REPORT_VERSION = 1
# A report or baseline read back: the facts of every host of the largest inventory fit.
REPORT_MAX_BYTES = 1 << 30


def write_atomic(path: str, doc: dict[str, Any]) -> None:
    """Writes doc as JSON to path so that a reader sees the old file or the whole new one."""
    write_text_atomic(path, json.dumps(doc, indent=2, sort_keys=False) + "\n")


STDOUT = safewrite.STDOUT  # a report flag's value that means standard output


def write_text_atomic(path: str, text: str) -> None:
    """Writes text to path so that a reader sees the old file or the whole new one, never
    half; '-' is standard output (common/safewrite.py: the links it follows, the files it
    refuses)."""
    safewrite.write_text(path, text)


def read(path: str) -> Report:
    """Returns a report (or baseline) written by write_atomic, decoded; raises InputError
    naming the file, and the field, when it is not one preflight can read."""
    return typed(load(path), path)


def load(path: str) -> dict[str, Any]:
    """Returns the JSON document of a report (or baseline), of a version this preflight
    reads; raises InputError naming the file when it is not one."""
    text = read_input(path, limit=REPORT_MAX_BYTES)
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise InputError(path, f"not a JSON report: {e.msg}", line=e.lineno) from None
    if not isinstance(doc, dict) or "report_version" not in doc:
        raise InputError(path, "not a preflight report (no report_version; made by "
                         "preflight check --json or preflight baseline)")
    if doc["report_version"] != REPORT_VERSION:
        raise InputError(path, f"report version {doc['report_version']!r} is not "
                         f"{REPORT_VERSION}, the one this preflight reads",
                         field="report_version")
    return doc


def typed(doc: dict[str, Any], path: str = "the report") -> Report:
    """The document as the typed Report (what a run renders, and what read returns)."""
    return decode(Report, doc, path)


def encode(report: Report, base: Optional[dict[str, Any]] = None) -> dict[str, Any]:
    """Returns report as its JSON document (docs/reports.md). Keys of base that the types do
    not know (a later release's) are kept, so a report read and written again (preflight
    report --json) loses nothing."""
    doc = {**(base or {}), **jsonable(report)}
    if doc["baseline"] is None:
        del doc["baseline"]  # a baseline file's section: a report has none
    for name, h in doc["hosts"].items():
        h["facts"] = facts_json(report.hosts[name].facts)
    return doc
