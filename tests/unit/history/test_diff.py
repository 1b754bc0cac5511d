"""preflight diff: what changed between two reports, noise left out."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from support import (
    NODES,
    G,
    cluster,
    good_cluster,
    net_tests,
    paddle,
    report_doc,
    same,
    slow_host,
    survey,
)

from preflight.history import diff
from preflight.judge import judge, run_checks
from preflight.model.cluster import Cluster
from preflight.report.jsonreport import typed


def report(c: Cluster) -> dict[str, Any]:
    return report_doc(c, judge(c, run_checks(c)))


def test_diff_names_facts_findings_and_links_that_changed_not_noise():
    a = report(good_cluster())
    changed = cluster(node01={}, node02={"paddle": paddle("2.6.2")}, node03={}, node04={})
    links = survey(NODES, slow_host("node03", 0.1 * G, 9.4 * G))
    b = report(replace(changed, network=net_tests(links)))
    b["hosts"]["node01"]["facts"]["cpu"]["loadavg"] = [9.0, 9.0, 9.0]  # noise, not news
    texts = [ch.text for ch in diff.compare(typed(a), typed(b))]
    assert "verdict go -> no-go" in texts
    assert "node02: paddle.version: 3.3.1 -> 2.6.2" in texts
    assert "node02: paddle.commit: c0ffee3.3.1 -> c0ffee2.6.2" in texts
    assert "node03 -> node04: 9.4 Gbit/s -> 100 Mbit/s (-99%)" in texts
    assert any(t.startswith("node02: new fail: [paddle-stack] paddle 2.6.2") for t in texts)
    assert not [t for t in texts if "loadavg" in t]
    assert diff.compare(typed(a), typed(a)) == []


def test_diff_of_hosts_added_removed_and_failed():
    a = report(cluster(**same(3)))
    b = report(cluster(node01={}, node02={}, node09={}))
    kinds = [(ch.kind, ch.text) for ch in diff.compare(typed(a), typed(b))]
    assert ("host", "node03: only in the first (" + a["hosts"]["node03"]["address"] + ")") \
        in kinds
    assert any(k == "host" and t.startswith("node09: only in the second") for k, t in kinds)


def test_two_runs_of_an_unchanged_cluster_compare_equal():
    # What changes between any two runs of a healthy host is not news: diff can gate on it.
    a, b = report(good_cluster()), report(good_cluster())
    facts = b["hosts"]["node01"]["facts"]
    facts["tmp"] = dict(facts.get("tmp") or {}, free_bytes=123)
    facts["cpu"]["other_work"] = {"scope": "host", "busy_cores": 1.7, "window_s": 1.0}
    facts["cpu"]["pressure_avg10"] = 55.0
    facts["ports"]["tcp"] = [22, 40123]
    facts["clock"]["skew_s"] = 0.4
    facts["paddle"]["nccl"] = None  # absent here, "0" or 0 in the other: the same
    a["hosts"]["node01"]["facts"]["paddle"]["nccl"] = "0"
    assert diff.compare(typed(a), typed(b)) == []
    a["hosts"]["node01"]["facts"]["paddle"]["nccl"] = "2.18.3"  # but a real value is news
    assert [ch.text for ch in diff.compare(typed(a), typed(b))] == [
        "node01: paddle.nccl: 2.18.3 -> absent"]


def test_a_finding_counts_by_its_status_not_the_numbers_in_its_message():
    a, b = report(good_cluster()), report(good_cluster())
    warn = {"check": "cpu-cores", "status": "warn", "hosts": ["node02"],
            "message": "node02: 1.2 cores free of other work"}
    a["findings"].append(warn)
    b["findings"].append(dict(warn, message="node02: 0.9 cores free of other work"))
    assert diff.compare(typed(a), typed(b)) == []
    b["findings"][-1] = dict(warn, status="fail")
    assert [ch.text for ch in diff.compare(typed(a), typed(b))] == \
        ["node02: warn -> fail: [cpu-cores] 1.2 cores free of other work"]


def test_the_same_change_on_many_hosts_is_one_line_and_every_host_in_json():
    hosts: dict[str, dict[str, Any]] = {f"node{i:02}": {} for i in range(1, 9)}
    a = report(cluster(**hosts))
    b = report(cluster(**{h: {"paddle": paddle("2.6.2")} for h in hosts}))
    changes = [ch for ch in diff.compare(typed(a), typed(b)) if ch.kind == "fact"]
    assert len(changes) == 16  # version and commit, on each of 8 hosts
    assert diff.lines(changes) == ["node[01-08]: paddle.commit: c0ffee3.3.1 -> c0ffee2.6.2",
                                   "node[01-08]: paddle.version: 3.3.1 -> 2.6.2"]
    doc = diff.document(changes, "a.json", "b.json")
    assert doc["differs"] and doc["count"] == 16
    assert {c["host"] for c in doc["changes"]} == set(hosts)
    # --ignore leaves out what the operator says is not news.
    assert [ch.what for ch in diff.compare(typed(a), typed(b), ignore=["paddle.commit"])
            if ch.kind == "fact"] == ["paddle.version: 3.3.1 -> 2.6.2"] * 8
