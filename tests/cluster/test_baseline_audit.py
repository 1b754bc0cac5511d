"""Baselines, audits and reports on the simulated cluster: a known-good baseline of three hosts,
then an audit where one new host runs another Paddle and sits behind a throttled link."""

from __future__ import annotations

import json
import os
import re

import pytest
from lxml import etree  # type: ignore[import-untyped]
from reporttools import assert_heatmap_painted, chromium, junit_schemas

from preflight.report import html

pytestmark = pytest.mark.cluster

GOOD = ["good1", "good2", "good3"]
FAST = ("--iperf-seconds", "1", "--iperf-warmup", "0", "--no-allreduce")


def test_audit_names_exactly_what_differs_from_the_baseline(cluster, tmp_path):
    base = os.path.join(cluster.tb.base, "baseline.json")
    rec = cluster.cli("baseline", "-i", cluster.inventory("base.yaml", GOOD), "-o", base, *FAST)
    assert rec.rc == 0, rec.stdout + rec.stderr
    assert "baseline recorded in" in rec.stdout and "3 hosts, links" in rec.stdout
    with open(base) as fh:
        sec = json.load(fh)["baseline"]
    assert sec["hosts"] == GOOD and sec["reference"]["paddle"] == "3.3.1"
    assert sec["link_bps"] > 0

    # New nodes: two like the baseline, and "slow": Paddle 2.6.2 and a 100 Mbit/s link.
    inv = cluster.inventory("new.yaml", ["good2", "good3", "slow"],
                            overrides={"slow": {"python": cluster.paddle_b}})
    out = {k: str(tmp_path / f"audit.{k}") for k in ("json", "xml", "html", "md")}
    # slow's link is shaped to a tenth of the baseline's; a tolerance of half keeps that far
    # outside it and the healthy links' run-to-run noise (1 s runs on 2 cores) well inside.
    run = cluster.cli("audit", "-i", inv, "--baseline", base, *FAST, "--tolerance", "50%",
                      "--json", out["json"], "--junit", out["xml"], "--html", out["html"],
                      "--markdown", out["md"])
    assert run.rc == 1, run.stdout + run.stderr
    with open(out["json"]) as fh:
        doc = json.load(fh)
    assert doc["command"] == "audit" and doc["audit"]["baseline"] == base
    # The baseline's link figure is its hosts' shaped links: the audit's healthy pair
    # measured near it, slow's links (shaped to a tenth) far below it.
    links = {(x["sender"], x["receiver"]): x["received_bps"] for x in doc["network"]["links"]
             if x["phase"] == "survey"}
    healthy = [b for pair, b in links.items() if "slow" not in pair]
    slowest = [b for pair, b in links.items() if "slow" in pair]
    assert healthy and all(sec["link_bps"] / 2 < b < 2 * sec["link_bps"] for b in healthy), \
        (links, sec["link_bps"])
    assert slowest and all(b < sec["link_bps"] / 5 for b in slowest), (links, sec["link_bps"])
    diffs = sorted((tuple(f["hosts"]), f["data"].get("field") or f["data"].get("kind"))
                   for f in doc["findings"] if f["check"] == "baseline" and f["status"] != "pass")
    assert diffs == [(("slow",), "link"), (("slow",), "paddle")]
    [ok] = [f for f in doc["findings"] if f["check"] == "baseline" and f["status"] == "pass"]
    assert ok["hosts"] == ["good2", "good3"]
    # The terminal's row: the host in its column, what was found beside it.
    assert re.search(r"\n\S+ +baseline +slow +paddle 2\.6\.2 != 3\.3\.1 in the baseline of 3 "
                     "hosts", run.stdout), run.stdout

    # The JUnit file of that audit is valid for Jenkins and fails slow's baseline case.
    with open(out["xml"], "rb") as fh:
        xml = fh.read()
    for name, xsd in junit_schemas().items():
        schema = etree.XMLSchema(etree.fromstring(xsd))
        assert schema.validate(etree.fromstring(xml)), (name, schema.error_log)
    tree = etree.fromstring(xml)
    failed = tree.xpath("//testsuite[@name='preflight']/testcase[@name='baseline']/failure")
    assert failed, xml
    lines = [ln for ln in failed[0].text.splitlines() if ln.startswith("[fail] ")]
    assert any(ln.startswith("[fail] slow: paddle 2.6.2 != 3.3.1") for ln in lines), lines
    assert not any("good2" in ln for ln in lines), lines  # good2 matches its baseline

    # What changed from the baseline, as diff tells it.
    d = cluster.cli("diff", base, out["json"])
    assert d.rc == 1
    assert "slow: only in the second" in d.stdout and "good1: only in the first" in d.stdout
    assert "verdict go -> no-go" in d.stdout


def test_html_of_a_real_run_renders_in_chromium(cluster, tmp_path):
    # A matrix over four hosts, one of them slow: every cell of the heatmap is measured.
    hosts = ["good1", "good2", "good3", "slow"]
    page = tmp_path / "report.html"
    run = cluster.cli("check", "-i", cluster.inventory("html.yaml", hosts), "--network-matrix",
                      "--iperf-seconds", "1", "--iperf-warmup", "0", "--html", str(page),
                      timeout=300)
    assert run.rc == 1, run.stdout + run.stderr
    shot = chromium(page, tmp_path)
    assert '<div class="banner nogo" id="verdict">NO-GO<ul><li>slow: slow host' in shot.dom
    assert shot.dom.count('class="bar"') == 6  # busbw and algbw at 1, 8 and 32 MiB
    assert_heatmap_painted(shot, html.CELL, 12)
    # The slow host's cells are the red end of the scale, the others the green end.
    for sender, receiver, fill in _cells(shot.dom):
        hue = int(fill[4:].split(",")[0])
        assert (hue < 40) == ("slow" in (sender, receiver)), (sender, receiver, fill)


def _cells(dom: str) -> list[tuple[str, str, str]]:
    import re

    return re.findall(r'data-sender="(\w+)" data-receiver="(\w+)" data-bps="\d+"><title>'
                      r'[^<]*</title><rect [^>]*fill="(hsl\([^"]+\))"', dom)
