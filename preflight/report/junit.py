"""JUnit XML for CI: one test case per check, its hosts named in compressed hostlists
(gpu[001-500]), plus the verdict; a waived check is a skipped case. At 500 hosts a
dashboard shows the dozen checks that ran, not 500 x 12 cases: each finding with its own
values stays in the JSON report.

The shape follows the schema Jenkins' xUnit plugin validates against (junit-10.xsd), which
GitLab and GitHub test-report actions read too: testsuites > testsuite > properties,
testcase > failure | error | system-out."""

from __future__ import annotations

import re
import time
import xml.etree.ElementTree as ET
from collections.abc import Sequence

from preflight import __version__
from preflight.common.grouping import group
from preflight.common.summary import STATUS_ORDER, sorted_findings
from preflight.common.units import hostlist
from preflight.model.findings import Finding, Verdict
from preflight.model.report import Report

# XML 1.0 cannot carry most control characters, and a probe may report anything.
_INVALID_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")
SUITE = "preflight"
HOSTS_MAX = 120  # characters of a hostlist in a line
MESSAGE_MAX = 500  # a failure's message attribute: what a dashboard shows in one line


def _clean(text: object) -> str:
    return _INVALID_XML.sub("?", str(text))


def _outcome(findings: Sequence[Finding], fail_on: str) -> tuple[str, str]:
    """Returns (element, type) for a test case: failure, error or "" (passed)."""
    statuses = {f.status.value for f in findings}
    worst = next((s for s in STATUS_ORDER if s in statuses), "pass")
    if worst in ("error", "could-not-check"):
        return "error", worst
    if worst == "fail" or (worst == "warn" and fail_on == "warn"):
        return "failure", worst
    if worst == "skip":  # n/a on one host, or not requested: a skipped test to a dashboard
        return "skipped", worst
    return "", worst


def _case(suite: ET.Element, name: str, findings: Sequence[Finding],
          fail_on: str) -> tuple[str, str]:
    """One check's test case: its worst status decides; every grouped line is its text."""
    case = ET.SubElement(suite, "testcase", classname=SUITE, name=name)
    element, worst = _outcome(findings, fail_on)
    groups = group(findings)
    text = "\n".join(f"[{g.status}] {_clean(g.text(HOSTS_MAX))}" for g in groups)
    if element == "skipped":  # the schema's skipped has a message and no type
        ET.SubElement(case, element, message=_clean(groups[0].text(HOSTS_MAX))[:MESSAGE_MAX])
    elif element:
        first = next(g for g in groups if g.status == worst)
        node = ET.SubElement(case, element, type=worst,
                             message=_clean(first.text(HOSTS_MAX))[:MESSAGE_MAX])
        node.text = text
    else:
        ET.SubElement(case, "system-out").text = text
    return element, worst


def _counts(suite: ET.Element, cases: list[tuple[str, str]]) -> None:
    suite.set("tests", str(len(cases)))
    suite.set("failures", str(sum(1 for e, _ in cases if e == "failure")))
    suite.set("errors", str(sum(1 for e, _ in cases if e == "error")))
    suite.set("skipped", str(sum(1 for e, _ in cases if e == "skipped")))


def render(report: Report, fail_on: str = "fail") -> str:
    """Returns the JUnit XML document of a report."""
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(report.started_at or 0))
    root = ET.Element("testsuites", name="preflight")
    per_check: dict[str, list[Finding]] = {}
    for f in sorted_findings(report):
        per_check.setdefault(f.check, []).append(f)
    hosts = report.hosts
    duration = f"{report.duration_s or 0:.3f}"
    suite = ET.SubElement(root, "testsuite", name=SUITE, timestamp=stamp, time=duration)
    props = ET.SubElement(suite, "properties")
    for name, value in (("verdict", report.verdict and report.verdict.value),
                        ("fail_on", fail_on), ("inventory", report.inventory),
                        ("preflight", __version__), ("hosts", len(hosts)),
                        ("host list", hostlist(list(hosts), HOSTS_MAX))):
        ET.SubElement(props, "property", name=name, value=_clean(value or "-"))
    verdict = ET.SubElement(suite, "testcase", classname=SUITE, name="verdict")
    cases = [("", "pass")]
    if report.verdict is not Verdict.GO:
        reasons = [_clean(r) for r in report.reasons]
        ET.SubElement(verdict, "failure", type="no-go",
                      message=("NO-GO: " + "; ".join(reasons[:3]))[:MESSAGE_MAX]
                      ).text = "\n".join(reasons)
        cases = [("failure", "no-go")]
    else:
        ET.SubElement(verdict, "system-out").text = "GO"
    for check, fs in per_check.items():
        cases.append(_case(suite, check, fs, fail_on))
    for check in report.waived:  # a CI dashboard shows a waiver as a skipped test
        case = ET.SubElement(suite, "testcase", classname=SUITE, name=check)
        ET.SubElement(case, "skipped", message=f"{check}: waived (--skip)")
        cases.append(("skipped", "waived"))
    _counts(suite, cases)
    for key in ("tests", "failures", "errors"):  # Jenkins' schema: no skipped here
        root.set(key, suite.get(key, "0"))
    root.set("time", duration)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") \
        + "\n"
