"""Reports at the sizes Paddle clusters have: 500 and 5,000 synthetic hosts sharing one fault
(a wrong interpreter and a low open-files limit on every host), rendered in every format.
The figures are printed (pytest -s)."""

from __future__ import annotations

import re
import time
from dataclasses import replace
from typing import Any

import pytest
from reporttools import chromium, read_png
from support import G, cluster, report_doc, slow_host, survey

from preflight.judge import judge, run_checks
from preflight.model import facts as F
from preflight.model.measure import NetworkTests
from preflight.placement.planner import plan
from preflight.report import html, junit, markdown, terminal
from preflight.report.jsonreport import typed

WIDTH = 100
BROKEN = F.PaddleFacts("/opt/conda/bin/python3", False,
                       reason="ModuleNotFoundError: No module named 'paddle'")
LOW_NOFILE = F.LimitsFacts(F.Limit(1024, 1024), F.Limit(None, None))


def synthetic(n: int, fault: bool = True) -> dict[str, Any]:
    names = [f"gpu{i:0{len(str(n))}d}" for i in range(1, n + 1)]
    spec = {"paddle": BROKEN, "limits": LOW_NOFILE} if fault else {}
    c = cluster(**{name: dict(spec) for name in names})
    net = NetworkTests("ring", tuple(names), tuple(survey(names, slow_host(names[7], 0.1 * G))))
    c = replace(c, network=net)
    ips = {name: f"10.{i >> 16 & 255}.{i >> 8 & 255}.{i & 255}" for i, name in enumerate(names)}
    findings = run_checks(c)
    p = plan(c, findings, ips)
    j = judge(c, findings, p)
    return report_doc(c, j, p, started_at=1795000000.0, fail_on="fail")


def figures(text: str) -> tuple[int, int]:
    lines = text.splitlines()
    return len(lines), max(len(line) for line in lines)


@pytest.fixture(scope="module")
def docs() -> dict[int, dict[str, Any]]:
    return {n: synthetic(n) for n in (500, 5000)}


@pytest.mark.parametrize("n", [500, 5000])
def test_a_shared_fault_fits_a_screen_at_any_size(docs, n):
    doc = docs[n]
    assert doc["verdict"] == "no-go" and len(doc["hosts"]) == n
    text = terminal.render(typed(doc), width=WIDTH)
    lines, widest = figures(text)
    print(f"\n{n} hosts terminal: {lines} lines, widest {widest}")
    assert lines <= 40 and widest <= WIDTH, text
    every = f"gpu[{1:0{len(str(n))}d}-{n}]"
    assert "Paddle not importable" in text and every in text
    # The plan's left-out list is one line for the hosts that share the reason.
    left = [ln for ln in text.splitlines() if ln.startswith("  left out ")]
    assert len(left) <= 3 and every in left[0], left
    verdict = text.splitlines()[-1]
    assert verdict.startswith("NO-GO: ") and len(verdict) <= WIDTH
    # The JSON still has every host's own finding.
    assert sum(1 for f in doc["findings"] if f["check"] == "paddle-stack"
               and f["status"] == "fail") >= 1
    assert len(doc["reasons"]) <= 10, doc["reasons"]


@pytest.mark.parametrize("n", [500, 5000])
def test_markdown_and_junit_stay_bounded(docs, n):
    doc = docs[n]
    md = markdown.render(typed(doc))
    lines, widest = figures(md)
    findings = md.split("### Findings")[1].split("###")[0]
    print(f"\n{n} hosts markdown: {len(md)} bytes, {lines} lines, widest {widest}; "
          f"findings section {len(findings.splitlines())} lines")
    assert len(findings.splitlines()) <= 40  # bad ones and the passed checks, a line each
    assert widest <= 2000  # the host table is a row per host, not a column each
    xml = junit.render(typed(doc))
    cases = xml.count("<testcase ")
    print(f"{n} hosts junit: {len(xml)} bytes, {cases} test cases")
    assert cases == 1 + len({f["check"] for f in doc["findings"]})
    assert len(xml) < 64_000


def test_rendering_grows_with_the_hosts_not_their_square(docs):
    def timed(doc: dict[str, Any]) -> tuple[float, float]:
        start = time.perf_counter()
        report = typed(doc)
        read = time.perf_counter()
        terminal.render(report, width=WIDTH)
        markdown.render(report)
        junit.render(report)
        return read - start, time.perf_counter() - read

    small = [min(t) for t in zip(*(timed(docs[500]) for _ in range(3)))]
    large = [min(t) for t in zip(*(timed(docs[5000]) for _ in range(3)))]
    for what, s, b in zip(("read", "render"), small, large):
        print(f"\n{what} 500 hosts {s:.3f} s, 5000 hosts {b:.3f} s ({b / s:.1f}x)")
        assert b / s < 30  # 10x the hosts: linear is ~10x, quadratic would be ~100x


def test_a_healthy_cluster_lists_its_plan_in_a_few_lines():
    doc = synthetic(500, fault=False)
    text = terminal.render(typed(doc), width=WIDTH)
    lines, widest = figures(text)
    print(f"\n500 healthy hosts terminal: {lines} lines, widest {widest}")
    assert lines <= 40 and widest <= WIDTH, text
    assert "... and " in text and "more: gpu" in text  # the rest of the plan, counted


def test_the_html_page_of_500_hosts_is_small_and_reads_in_chromium(docs, tmp_path):
    page = html.render(typed(docs[500]))
    print(f"\n500 hosts html: {len(page)} bytes")
    assert len(page) < 2 << 20
    assert "id='heatmap'" not in page and "id='per-host-links'" in page  # no n x n grid
    path = tmp_path / "r500.html"
    path.write_text(page)
    shot = chromium(path, tmp_path, height=1400)
    # What chromium built: the banner, one findings row per thing found, a row per host in
    # the per-host bandwidth table with the throttled host first.
    assert re.search(r'id="verdict">NO-GO<ul><li>gpu\[001-500\]: Paddle not importable',
                     shot.dom)
    assert shot.dom.count("class=\"finding s-row-fail\"") == 3
    rows = re.findall(r'class="link-host" data-host="(gpu\d+)"', shot.dom)
    assert len(rows) == 500 and rows[0] == "gpu008"
    img = read_png(shot.png)
    assert (img.width, img.height) == (1280, 1400)
    assert img.count((0xC6, 0x28, 0x28)) > 1280 * 60  # the red NO-GO banner across the page
