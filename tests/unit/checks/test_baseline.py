"""The baseline check of an audit: every difference from the baseline, bandwidth in tolerance."""

from __future__ import annotations

from dataclasses import replace

import pytest
from support import (
    AUDIT_NOW,
    NODES,
    G,
    cluster,
    good_cluster,
    gpu,
    net_tests,
    paddle,
    report_doc,
    same,
    slow_host,
    survey,
)

from preflight.checks import baseline as check
from preflight.common import profile
from preflight.history import baseline as B
from preflight.judge import judge, run_checks
from preflight.model.baseline import Audit, Baseline
from preflight.model.cluster import Cluster
from preflight.model.facts import Interface, NetworkFacts
from preflight.model.findings import Finding, Status
from preflight.model.measure import AllReduce, SizeResult
from preflight.report.jsonreport import typed


def recorded(c: Cluster, taken_at: float = AUDIT_NOW - 3600) -> Baseline:
    """Records c as a baseline and reads it back, as `preflight baseline` then `audit` do."""
    doc = report_doc(c, judge(c, run_checks(c)), baseline=B.section(
        profile.of_hosts(c.outcomes), c.network, taken_at, "/x/good.yaml"))
    return B.from_document("good.json", typed(doc, "good.json"))


def audit(c: Cluster, base: Baseline, **kw) -> list[Finding]:
    return list(check.check(replace(c, audit=Audit(base, AUDIT_NOW, **kw))))


def not_passed(findings):
    return sorted((f.hosts, f.data.get("field") or f.data.get("kind"), f.status)
                  for f in findings if f.status is not Status.PASS)


def test_the_same_cluster_matches_its_baseline():
    base = recorded(good_cluster())
    assert base.link_bps == pytest.approx(9.4 * G) and base.reference.paddle == "3.3.1"
    fs = audit(good_cluster(), base)
    assert not_passed(fs) == []
    [ok] = fs
    assert ok.hosts == tuple(NODES) and "links >= 80% of 9.4 Gbit/s" in ok.message


def test_every_difference_of_a_new_host_is_its_own_finding():
    base = recorded(good_cluster())
    new = cluster(node01={}, node02={}, node03={},
                  node04={"paddle": paddle("2.6.2"), "gpu": gpu(n=4, driver="535.104.05")})
    new = replace(new, network=net_tests(survey(NODES, slow_host("node04", 0.1 * G, 9.4 * G))))
    fs = audit(new, base)
    assert not_passed(fs) == [
        (("node04",), "driver", Status.FAIL), (("node04",), "gpu_count", Status.FAIL),
        (("node04",), "link", Status.FAIL), (("node04",), "paddle", Status.FAIL)]
    by_field = {f.data.get("field") or f.data.get("kind"): f for f in fs}
    assert by_field["paddle"].message.startswith(
        "node04: paddle 2.6.2 != 3.3.1 in the baseline of 4 hosts, ")
    assert by_field["link"].message.startswith(
        "node04: sends at most 100 Mbit/s and receives at most 100 Mbit/s; the baseline")
    [ok] = [f for f in fs if f.status is Status.PASS]
    assert ok.hosts == ("node01", "node02", "node03")


@pytest.mark.parametrize("measured,tolerance,status", [
    (8.0, 0.2, None), (7.0, 0.2, Status.FAIL), (7.0, 0.3, None)],
    ids=["within-20pct", "below-20pct", "within-30pct"])
def test_bandwidth_tolerance(measured, tolerance, status):
    base = recorded(good_cluster())
    links = survey(NODES, slow_host("node02", measured * G, 9.4 * G))
    slow = replace(good_cluster(), network=net_tests(links))
    got = [f.status for f in audit(slow, base, tolerance=tolerance) if f.status is not Status.PASS]
    assert got == ([] if status is None else [status])


def test_old_measurements_are_flagged_but_still_compared():
    base = recorded(good_cluster(), taken_at=AUDIT_NOW - 30 * 3600)
    fs = audit(good_cluster(), base)
    [old] = [f for f in fs if f.status is Status.WARN]
    assert old.hosts == () and "30.0 h old (limit 24 h" in old.message
    fresh = audit(good_cluster(), base, max_age_s=48 * 3600)
    assert not [f for f in fresh if f.status is Status.WARN]


def test_no_network_tests_in_the_audit_is_said():
    fs = audit(cluster(**same(4)), recorded(good_cluster()))
    assert [(f.status, f.data.get("kind")) for f in fs if f.status is not Status.PASS] == [
        (Status.WARN, "unmeasured")]


def test_slow_allreduce_is_blamed_on_the_slow_host_when_links_explain_it():
    sizes = (SizeResult(32 << 20, 0.04, 4),)
    base = recorded(replace(good_cluster(), network=net_tests(survey(NODES, lambda s, r: 9.4 * G),
                                                AllReduce("gloo", tuple(NODES), 4, sizes))))
    slower = (SizeResult(32 << 20, 0.4, 4),)
    links = survey(NODES, slow_host("node03", 0.1 * G, 9.4 * G))
    measured = net_tests(links, AllReduce("gloo", tuple(NODES), 4, slower))
    fs = audit(replace(good_cluster(), network=measured), base)
    [ar] = [f for f in fs if f.data.get("kind") == "allreduce"]
    assert ar.status is Status.WARN and ar.hosts == ("node03",)
    fs = audit(replace(good_cluster(), network=net_tests(survey(NODES, lambda s, r: 9.4 * G),
                                           AllReduce("gloo", tuple(NODES), 4, slower))), base)
    [ar] = [f for f in fs if f.data.get("kind") == "allreduce"]
    assert ar.status is Status.FAIL and ar.hosts == tuple(NODES)


def test_mtu_difference_uses_the_job_interface():
    base = recorded(good_cluster())
    odd = NetworkFacts((Interface("eth0", 9000, "up", 10000, ("10.0.0.1/24",)),),
                       default_route="eth0")
    fs = audit(replace(cluster(node01={"network": odd}), network=None), base)
    assert [(f.data.get("field"), f.message.split(" in the")[0]) for f in fs
            if f.status is Status.FAIL] == [("mtu", "node01: MTU 9000 != 1500")]
