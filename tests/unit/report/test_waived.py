"""A waived check (--skip) does not run, cannot block, and every report format says so."""

from __future__ import annotations

from typing import Any

from lxml import etree  # type: ignore[import-untyped]
from reporttools import junit_schemas
from support import cluster, paddle, report_doc, same

from preflight.judge import judge, run_checks
from preflight.model.findings import Verdict
from preflight.pipeline import checks_to_run
from preflight.report import html, junit, markdown, terminal
from preflight.report.jsonreport import typed


def judged(skip: tuple[str, ...]) -> tuple[Any, dict[str, Any]]:
    # node02 runs another Paddle: paddle-stack fails it, unless waived.
    c = cluster(**dict(same(3), node02={"paddle": paddle("2.6.2")}))
    findings = run_checks(c, checks_to_run(skip))
    j = judge(c, findings, waived=skip)
    return j, report_doc(c, j, started_at=1795000000.0, fail_on="fail")


def test_a_waived_check_does_not_run_and_cannot_block():
    j, _ = judged(())
    assert j.verdict is Verdict.NO_GO and any(f.check == "paddle-stack" for f in j.findings)
    j, doc = judged(("paddle-stack",))
    assert not any(f.check == "paddle-stack" for f in j.findings)
    assert j.verdict is Verdict.GO, j.reasons
    assert doc["waived"] == ["paddle-stack"]


def test_every_format_names_the_waiver():
    j, doc = judged(("paddle-stack",))
    text = terminal.render(typed(doc), width=120)
    assert "WAIVED (not run, --skip): paddle-stack" in text
    assert text.rstrip().endswith("1 waived")
    assert "waived (not run, `--skip`): paddle-stack" in markdown.render(typed(doc))
    assert "waived (not run): paddle-stack" in html.render(typed(doc))
    xml = junit.render(typed(doc))
    root = etree.fromstring(xml.encode())
    skipped = root.findall(".//testcase[@name='paddle-stack']/skipped")
    assert len(skipped) == 1 and "waived" in skipped[0].get("message")
    assert root.find("testsuite[@name='preflight']").get("skipped") == "1"
    for name, xsd in junit_schemas().items():
        schema = etree.XMLSchema(etree.fromstring(xsd))
        assert schema.validate(root), (name, schema.error_log)
