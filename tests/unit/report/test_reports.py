"""JUnit, Markdown and HTML reports, rendered from report documents made of facts."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

import pytest
from lxml import etree  # type: ignore[import-untyped]
from reporttools import assert_heatmap_painted, chromium, heatmap_fills, junit_schemas, read_png
from support import REFUSED, G, cluster, paddle, report_doc, same, slow_host, survey

from preflight.judge import judge, run_checks
from preflight.model.cluster import Cluster
from preflight.model.facts import GpuFacts
from preflight.model.findings import FailOn, Finding, Status
from preflight.model.measure import AllReduce, NetworkTests, SizeResult
from preflight.report import html, junit, markdown
from preflight.report.jsonreport import typed

HOSTS = ["node01", "node02", "node03", "node04"]


def doc_of(c: Cluster, fail_on: FailOn = "fail", extra: tuple[Finding, ...] = (),
           ) -> dict[str, Any]:
    findings = run_checks(c) + list(extra)
    j = judge(c, findings, fail_on=fail_on)
    return report_doc(c, j, started_at=1795000000.0, duration_s=4.2, inventory="/x/inv.yaml",
                      fail_on=fail_on)


def measured_cluster() -> Cluster:
    """Four hosts, node03 slow both ways, a gloo all-reduce at three sizes."""
    sizes = tuple(SizeResult(m << 20, m * 0.004, 4) for m in (1, 8, 32))
    net = NetworkTests("matrix", tuple(HOSTS), tuple(survey(
        HOSTS, slow_host("node03", 0.1 * G, 10 * G),
        schedule=lambda hs: [[(s, r) for s in hs for r in hs if s != r]])),
        AllReduce("gloo", tuple(HOSTS), 4, sizes))
    return replace(cluster(**same(4)), network=net)


def failing_doc() -> dict[str, Any]:
    hostile = Finding("env", Status.WARN, ("node02",),
                      "node02: NCCL_DEBUG=<script>alert(1)</script> | a\x07b & \"q\"")
    c = cluster(node01={}, node02={"paddle": paddle("2.6.2")}, node03={}, node04=REFUSED)
    return doc_of(c, extra=(hostile,))


# ---------------------------------------------------------------- JUnit
@pytest.mark.parametrize("make", [lambda: doc_of(measured_cluster()), failing_doc],
                         ids=["go", "no-go-hostile-text"])
def test_junit_validates_against_jenkins_schema(make):
    xml = junit.render(typed(make())).encode()
    schemas = junit_schemas()
    assert len(schemas) >= 1
    for name, xsd in schemas.items():
        schema = etree.XMLSchema(etree.fromstring(xsd))
        assert schema.validate(etree.fromstring(xml)), (name, schema.error_log)


def test_junit_one_case_per_check_naming_its_hosts():
    doc = failing_doc()
    root = etree.fromstring(junit.render(typed(doc)).encode())
    [suite] = root.findall("testsuite")
    assert suite.get("name") == "preflight"
    cases = {c.get("name"): c for c in suite.findall("testcase")}
    assert list(cases)[0] == "verdict"
    assert cases["verdict"].find("failure").get("type") == "no-go"
    assert set(cases) == {"verdict", *(f["check"] for f in doc["findings"])}  # one per check
    failure = cases["paddle-stack"].find("failure")
    assert failure.get("message") == "node02: paddle 2.6.2 != 3.3.1 (2 of 3 hosts)"
    assert cases["env"].find("failure") is None  # a warning passes under --fail-on fail
    assert "a?b" in cases["env"].find("system-out").text  # the bell is not valid XML
    down = cases["reachable"].find("error")
    assert down is not None and down.get("type") == "could-not-check"
    assert down.get("message").startswith("node04: could not check (connect): connection")
    props = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert props["hosts"] == "4" and props["host list"] == "node[01-04]"
    assert int(suite.get("failures")) == 2 and int(suite.get("errors")) == 1
    assert root.get("tests") == suite.get("tests") == str(len(cases))


def test_junit_groups_hosts_that_share_a_finding():
    c = cluster(**same(6), node07={"paddle": paddle("2.6.2")}, node08={"paddle": paddle("2.6.2")})
    case = etree.fromstring(junit.render(typed(doc_of(c))).encode()).find(
        "testsuite/testcase[@name='paddle-stack']")
    lines = case.find("failure").text.splitlines()
    assert [ln for ln in lines if ln.startswith("[fail]")] == [
        "[fail] node[07-08]: paddle 2.6.2 != 3.3.1 (6 of 8 hosts)"]


def test_junit_fail_on_warn_turns_warnings_into_failures():
    warn = Finding("env", Status.WARN, ("node01",), "node01: NCCL_DEBUG=INFO is set")
    c = cluster(**same(3, gpu=GpuFacts("none"), paddle=paddle(compiled_with_cuda=False)))
    lenient = doc_of(c, extra=(warn,))
    strict = doc_of(c, "warn", extra=(warn,))
    assert lenient["verdict"] == "go" and strict["verdict"] == "no-go"
    assert strict["reasons"] == ["node01: NCCL_DEBUG=INFO is set"]
    case = etree.fromstring(junit.render(typed(strict), "warn").encode()).find(
        "testsuite/testcase[@name='env']")
    assert case is not None and case.find("failure").get("type") == "warn"


# ---------------------------------------------------------------- Markdown
def test_markdown_leads_with_verdict_and_escapes_cells():
    md = markdown.render(typed(failing_doc()))
    assert md.startswith("## preflight: ❌ NO-GO\n")
    row = next(line for line in md.splitlines() if "NCCL_DEBUG" in line)
    assert "\\| a" in row and "&lt;script>" in row  # a pipe cannot split the row
    assert len(re.findall(r"(?<!\\)\|", row)) == 7  # six columns, however hostile
    assert "\x07" not in md
    assert "| could not check | reachable | node04 |" in md
    # The odd host out in the side-by-side table is bold.
    header = next(line for line in md.splitlines() if line.startswith("| host |"))
    column = header.split(" | ").index("paddle")
    rows = {line.split(" | ")[0][2:]: line.split(" | ") for line in md.splitlines()
            if line.startswith("| node0")}
    assert rows["node02"][column] == "**2.6.2**" and rows["node01"][column] == "3.3.1"


# ---------------------------------------------------------------- HTML
def test_html_is_self_contained_and_escapes_everything():
    page = html.render(typed(failing_doc()))
    assert "<script>" not in page and "&lt;script&gt;" in page
    for ref in ("src=", "href=", "url(", "@import", "http://", "https://"):
        assert ref not in page.replace("http://www.w3.org/2000/svg", "")
    assert "class='banner nogo'" in page


def test_html_heatmap_has_a_cell_per_ordered_pair():
    page = html.render(typed(doc_of(measured_cluster())))
    cells = re.findall(r"data-sender='(\w+)' data-receiver='(\w+)' data-bps='(\d*)'", page)
    assert len(cells) == 16
    bps = {(s, r): b for s, r, b in cells}
    assert bps[("node03", "node01")] == str(int(0.1 * G)) and bps[("node01", "node01")] == ""
    assert html.heat_color(0.01) in page and html.heat_color(1.0) in page


def test_html_renders_in_chromium_with_the_slow_host_in_red(tmp_path):
    page = tmp_path / "report.html"
    page.write_text(html.render(typed(doc_of(measured_cluster()))))
    shot = chromium(page, tmp_path, height=1400)
    # What chromium built: the verdict, the heatmap with every cell, the all-reduce bars.
    assert re.search(r"id=\"verdict\">NO-GO<ul><li>node03: slow host", shot.dom)
    assert shot.dom.count('class="cell"') == 16 and shot.dom.count('class="bar"') == 6
    img = read_png(shot.png)
    assert (img.width, img.height) == (1280, 1400)
    # 6 slow cells (node03's row and column) red, 6 fast ones green, each on screen.
    assert heatmap_fills(shot.dom) == {html.heat_color(0.01): 6, html.heat_color(1.0): 6}
    assert_heatmap_painted(shot, html.CELL, 12)
    assert img.count((0xC6, 0x28, 0x28)) > 1280 * 60  # the red NO-GO banner across the page


def test_the_all_reduce_bars_are_drawn_as_tall_as_their_values_in_chromium(tmp_path):
    # Chromium applies CSS geometry to SVG: a page rule for the link table's bars once drew
    # every all-reduce bar 10 px tall. The page gets a script, for this test only, that
    # writes each bar's drawn height into the DOM chromium dumps.
    sizes = tuple(SizeResult(m << 20, t, 4) for m, t in ((1, 0.008), (8, 0.02), (32, 0.05)))
    measured = measured_cluster().network
    assert measured is not None
    net = replace(measured, allreduce=AllReduce("gloo", tuple(HOSTS), 4, sizes))
    c = replace(cluster(**same(4)), network=net)
    measure = ("<script>for (const r of document.querySelectorAll('#allreduce rect.bar')) "
               "r.setAttribute('data-drawn', r.getBoundingClientRect().height.toFixed(2));"
               "</script></body>")
    page = tmp_path / "chart.html"
    page.write_text(html.render(typed(doc_of(c))).replace("</body>", measure))
    dom = chromium(page, tmp_path, height=1400).dom
    bars = [(float(v), float(h)) for v, h in re.findall(
        r'<rect class="bar" data-(?:busbw|algbw)="(\d+)"[^>]*data-drawn="([\d.]+)"', dom)]
    assert len(bars) == 6, dom[:2000]
    top = max(v for v, _ in bars)
    tallest = max(h for _, h in bars)
    assert tallest > 100  # the chart's full height, not a 10 px strip
    for value, height in bars:  # each as tall as its value says, to a pixel
        assert abs(height - tallest * value / top) <= 1.0, bars
    assert len({round(h) for _, h in bars}) >= 4  # the values differ, and so do the bars


def test_a_local_audit_shows_the_machine_first_and_n_a_as_skipped():
    from preflight.report import terminal
    doc = dict(doc_of(cluster(gpunode={})), local=True)
    out = terminal.render(typed(doc), width=200).splitlines()
    assert out[:6] == [
        "THIS MACHINE n (Debian 12, kernel 6.1, x86_64)",
        "  CPU      ?: 16 logical cores",
        "  memory   64.0 GiB, 32.0 GiB available; /dev/shm 16.0 GiB; /tmp 32.0 GiB free",
        "  GPUs     8 x NVIDIA H100 80GB HBM3 (81559 MiB, compute 9.0); driver 550.54.15 "
        "(CUDA 12.4), read with nvml",
        "  Paddle   3.3.1 with /opt/paddle/bin/python (Python 3.11.2), CUDA 12.4, cuDNN "
        "9.5.1, NCCL 22501",
        "  network  eth0 10.0.0.1/24, MTU 1500, 10000 Mbit/s"], out[:6]
    assert any(ln.startswith("n/a     mtu ") for ln in out), out
    # JUnit: an n/a check is a skipped test, not a pass and not a failure.
    tree = etree.fromstring(junit.render(typed(doc)).encode())
    assert tree.xpath("//testcase[@name='mtu']/skipped/@message") == \
        ["gpunode: n/a on one host (compares hosts)"]
    assert not tree.xpath("//testcase[@name='mtu']/failure")
    # Markdown folds it with the passes.
    md = markdown.render(typed(doc))
    assert "| ➖ | mtu | n/a on one host (compares hosts) |" in md


# ---------------------------------------------------------------- fixes
def test_every_finding_that_asks_for_action_carries_its_checks_fix_in_every_report():
    from preflight.checks import ALL_CHECKS
    from preflight.report import terminal
    fixes = {c.name: c.fix for c in ALL_CHECKS}
    doc = failing_doc()
    by_status: dict[str, list[dict[str, Any]]] = {}
    for f in doc["findings"]:
        by_status.setdefault(f["status"], []).append(f)
    # JSON: a "fix" on each failure and could-not-check (the wrong Paddle, the refused host),
    # the check's own; none on a pass, where there is nothing to do.
    for f in by_status["fail"] + by_status["could-not-check"]:
        assert f["fix"] == fixes[f["check"]] and f["fix"].endswith("."), f
    assert all(f["fix"] == "" for f in by_status["pass"])
    stack = fixes["paddle-stack"]
    report = typed(doc)
    # The terminal: with -v, after the finding; the summary stays one line a finding.
    detail = terminal.render(report, width=0, detail=True).splitlines()
    at = next(i for i, ln in enumerate(detail) if ln.startswith("  fail  paddle-stack "))
    assert detail[at + 1] == f"    fix: {stack}"
    assert f"fix: {stack}" not in terminal.render(report, width=0)
    # Markdown and HTML: a fix column in the table of findings.
    row = next(ln for ln in markdown.render(report).splitlines() if "| paddle-stack |" in ln)
    assert row.rstrip(" |").endswith(stack.replace("|", "\\|")), row
    page = html.render(report)
    assert re.search(r"<td>paddle-stack</td>.*?<td class='fix'>" + re.escape(
        html.esc(stack)) + "</td>", page)
