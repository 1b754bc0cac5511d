"""JUnit XML for CI: one test suite per host (its key facts as properties), one test case per
check and host, plus a cluster suite with the verdict and findings that name no host.

The shape follows the schema Jenkins' xUnit plugin validates against (junit-10.xsd), which
GitLab and GitHub test-report actions read too: testsuites > testsuite > properties,
testcase > failure | error | system-out."""

from __future__ import annotations

import re
import time
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from typing import Any

from preflight import __version__
from preflight.report.summary import STATUS_ORDER, key_facts, sorted_findings, waived_checks

# XML 1.0 cannot carry most control characters, and a probe may report anything.
_INVALID_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")
CLUSTER = "cluster"


def _clean(text: object) -> str:
    return _INVALID_XML.sub("?", str(text))


def _outcome(findings: Sequence[Mapping[str, Any]], fail_on: str) -> tuple[str, str]:
    """Returns (element, type) for a test case: failure, error or "" (passed)."""
    statuses = {f.get("status") for f in findings}
    worst = next((s for s in STATUS_ORDER if s in statuses), "pass")
    if worst in ("error", "could-not-check"):
        return "error", worst
    if worst == "fail" or (worst == "warn" and fail_on == "warn"):
        return "failure", worst
    return "", worst


def _case(suite: ET.Element, classname: str, name: str, findings: Sequence[Mapping[str, Any]],
          fail_on: str) -> tuple[str, str]:
    case = ET.SubElement(suite, "testcase", classname=classname, name=name)
    element, worst = _outcome(findings, fail_on)
    text = "\n".join(f"[{f.get('status')}] {_clean(f.get('message', ''))}" for f in findings)
    if element:
        bad = [f for f in findings if f.get("status") == worst]
        node = ET.SubElement(case, element, type=worst, message=_clean(bad[0].get("message")))
        node.text = text
    else:
        ET.SubElement(case, "system-out").text = text
    return element, worst


def _counts(suite: ET.Element, cases: list[tuple[str, str]]) -> None:
    suite.set("tests", str(len(cases)))
    suite.set("failures", str(sum(1 for e, _ in cases if e == "failure")))
    suite.set("errors", str(sum(1 for e, _ in cases if e == "error")))
    suite.set("skipped", str(sum(1 for e, _ in cases if e == "skipped")))


def render(doc: Mapping[str, Any], fail_on: str = "fail") -> str:
    """Returns the JUnit XML document of a JSON report."""
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(doc.get("started_at") or 0))
    root = ET.Element("testsuites", name="preflight")
    findings = sorted_findings(doc)
    per_host: dict[str, dict[str, list[Mapping[str, Any]]]] = {}
    for f in findings:
        for host in f.get("hosts") or [CLUSTER]:
            per_host.setdefault(str(host), {}).setdefault(str(f.get("check")), []).append(f)

    cluster = ET.SubElement(root, "testsuite", name=f"preflight.{CLUSTER}", timestamp=stamp,
                            time=f"{float(doc.get('duration_s') or 0):.3f}")
    props = ET.SubElement(cluster, "properties")
    for name, value in (("verdict", doc.get("verdict")), ("fail_on", fail_on),
                        ("inventory", doc.get("inventory")), ("preflight", __version__)):
        ET.SubElement(props, "property", name=name, value=_clean(value or "-"))
    verdict = ET.SubElement(cluster, "testcase", classname=f"preflight.{CLUSTER}",
                            name="verdict")
    cases = [("", "pass")]
    if doc.get("verdict") != "go":
        reasons = [_clean(r) for r in doc.get("reasons") or []]
        ET.SubElement(verdict, "failure", type="no-go",
                      message="NO-GO: " + "; ".join(reasons[:3])).text = "\n".join(reasons)
        cases = [("failure", "no-go")]
    else:
        ET.SubElement(verdict, "system-out").text = "GO"
    for check, fs in per_host.pop(CLUSTER, {}).items():
        cases.append(_case(cluster, f"preflight.{CLUSTER}", check, fs, fail_on))
    for check in waived_checks(doc):  # a CI dashboard shows a waiver as a skipped test
        case = ET.SubElement(cluster, "testcase", classname=f"preflight.{CLUSTER}", name=check)
        ET.SubElement(case, "skipped", message=f"{check}: waived (--skip)")
        cases.append(("skipped", "waived"))
    _counts(cluster, cases)

    hosts = doc.get("hosts") or {}
    for host in list(hosts) + [h for h in per_host if h not in hosts]:
        info = hosts.get(host) or {}
        suite = ET.SubElement(root, "testsuite", name=f"preflight.{host}", timestamp=stamp,
                              hostname=_clean(info.get("address", "")),
                              time=f"{float(info.get('elapsed_s') or 0):.3f}")
        props = ET.SubElement(suite, "properties")
        for label, value in key_facts(info) if info else []:
            ET.SubElement(props, "property", name=label, value=_clean(value))
        cases = [_case(suite, f"preflight.{host}", check, fs, fail_on)
                 for check, fs in per_host.get(host, {}).items()]
        _counts(suite, cases)
    total = root.findall("testsuite")
    for key in ("tests", "failures", "errors"):  # Jenkins' schema: no skipped here
        root.set(key, str(sum(int(s.get(key, "0")) for s in total)))
    root.set("time", f"{float(doc.get('duration_s') or 0):.3f}")
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") \
        + "\n"
