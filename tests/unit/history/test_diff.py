"""preflight diff: what changed between two reports, noise left out."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from support import NODES, G, cluster, good_cluster, net_tests, paddle, same, slow_host, survey

from preflight.history import diff
from preflight.judge import judge, run_checks
from preflight.model.cluster import Cluster
from preflight.report import jsonreport


def report(c: Cluster) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(json.dumps(jsonreport.jsonable(
        jsonreport.document(c, judge(c, run_checks(c))))))
    return doc


def test_diff_names_facts_findings_and_links_that_changed_not_noise():
    a = report(good_cluster())
    changed = cluster(node01={}, node02={"paddle": paddle("2.6.2")}, node03={}, node04={})
    links = survey(NODES, slow_host("node03", 0.1 * G, 9.4 * G))
    b = report(replace(changed, network=net_tests(links)))
    b["hosts"]["node01"]["facts"]["cpu"]["loadavg"] = [9.0, 9.0, 9.0]  # noise, not news
    texts = [ch.text for ch in diff.compare(a, b)]
    assert "verdict go -> no-go" in texts
    assert "node02: paddle.version: 3.3.1 -> 2.6.2" in texts
    assert "node02: paddle.commit: c0ffee3.3.1 -> c0ffee2.6.2" in texts
    assert "node03 -> node04: 9.4 Gbit/s -> 100 Mbit/s (-99%)" in texts
    assert any(t.startswith("new fail: [paddle-stack] node02: paddle 2.6.2") for t in texts)
    assert not [t for t in texts if "loadavg" in t]
    assert diff.compare(a, a) == []


def test_diff_of_hosts_added_removed_and_failed():
    a = report(cluster(**same(3)))
    b = report(cluster(node01={}, node02={}, node09={}))
    kinds = [(ch.kind, ch.text) for ch in diff.compare(a, b)]
    assert ("host", "node03: only in the first (" + a["hosts"]["node03"]["address"] + ")") \
        in kinds
    assert any(k == "host" and t.startswith("node09: only in the second") for k, t in kinds)
