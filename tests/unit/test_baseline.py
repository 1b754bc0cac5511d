"""Baselines on facts: profiles, the baseline check of an audit, loading, and diff."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest
from support import G, cluster, gpu, paddle, same, slow_host, survey

from preflight import baseline as B
from preflight import diff, profile
from preflight.checks import baseline as check
from preflight.engine import judge, run_checks
from preflight.errors import InputError
from preflight.facts import Interface, NetworkFacts, SectionError
from preflight.measure import AllReduce, NetworkTests, SizeResult
from preflight.model import Cluster, Finding, Status
from preflight.report import jsonreport

NOW = 1795000000.0
HOSTS = ["node01", "node02", "node03", "node04"]


def net(links, ar=None) -> NetworkTests:
    return NetworkTests("ring", tuple(HOSTS), tuple(links), ar)


def recorded(c: Cluster, taken_at: float = NOW - 3600) -> B.Baseline:
    """Records c as a baseline and reads it back, as `preflight baseline` then `audit` do."""
    doc = jsonreport.jsonable(jsonreport.document(c, judge(c, run_checks(c))))
    doc["baseline"] = B.section(c.outcomes, c.network, taken_at, "/x/good.yaml")
    return B.from_document("good.json", json.loads(json.dumps(doc)))


def good() -> Cluster:
    return replace(cluster(**same(4)), network=net(survey(HOSTS, lambda s, r: 9.4 * G)))


def audit(c: Cluster, base: B.Baseline, **kw) -> list[Finding]:
    return list(check.check(replace(c, audit=B.Audit(base, NOW, **kw))))


def not_passed(findings):
    return sorted((f.hosts, f.data.get("field") or f.data.get("kind"), f.status)
                  for f in findings if f.status is not Status.PASS)


def test_profile_is_what_must_match():
    facts = cluster(a={}).outcomes[0].facts
    assert facts is not None
    p = profile.of_host(facts, "10.0.0.1")
    assert (p.gpu_count, p.gpu_model, p.driver, p.paddle, p.cuda, p.python, p.mtu,
            p.nic_speed_mbps) == (8, "NVIDIA H100 80GB HBM3", "550.54.15", "3.3.1", "12.4",
                                  "3.11", 1500, 10000)
    facts = cluster(a={"gpu": SectionError("nvml: boom")}).outcomes[0].facts
    assert facts is not None
    broken = profile.of_host(facts, "10.0.0.1")
    assert broken.unknown == ("gpu: nvml: boom",) and broken.gpu_model is None


def test_the_same_cluster_matches_its_baseline():
    base = recorded(good())
    assert base.link_bps == pytest.approx(9.4 * G) and base.reference.paddle == "3.3.1"
    fs = audit(good(), base)
    assert not_passed(fs) == []
    [ok] = fs
    assert ok.hosts == tuple(HOSTS) and "links >= 80% of 9.4 Gbit/s" in ok.message


def test_every_difference_of_a_new_host_is_its_own_finding():
    base = recorded(good())
    new = cluster(node01={}, node02={}, node03={},
                  node04={"paddle": paddle("2.6.2"), "gpu": gpu(n=4, driver="535.104.05")})
    new = replace(new, network=net(survey(HOSTS, slow_host("node04", 0.1 * G, 9.4 * G))))
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
    base = recorded(good())
    slow = replace(good(), network=net(survey(HOSTS, slow_host("node02", measured * G, 9.4 * G))))
    got = [f.status for f in audit(slow, base, tolerance=tolerance) if f.status is not Status.PASS]
    assert got == ([] if status is None else [status])


def test_old_measurements_are_flagged_but_still_compared():
    base = recorded(good(), taken_at=NOW - 30 * 3600)
    fs = audit(good(), base)
    [old] = [f for f in fs if f.status is Status.WARN]
    assert old.hosts == () and "30.0 h old (limit 24 h" in old.message
    assert not [f for f in audit(good(), base, max_age_s=48 * 3600) if f.status is Status.WARN]


def test_no_network_tests_in_the_audit_is_said():
    fs = audit(cluster(**same(4)), recorded(good()))
    assert [(f.status, f.data.get("kind")) for f in fs if f.status is not Status.PASS] == [
        (Status.WARN, "unmeasured")]


def test_slow_allreduce_is_blamed_on_the_slow_host_when_links_explain_it():
    sizes = (SizeResult(32 << 20, 0.04, 4),)
    base = recorded(replace(good(), network=net(survey(HOSTS, lambda s, r: 9.4 * G),
                                                AllReduce("gloo", tuple(HOSTS), 4, sizes))))
    slower = (SizeResult(32 << 20, 0.4, 4),)
    links = survey(HOSTS, slow_host("node03", 0.1 * G, 9.4 * G))
    fs = audit(replace(good(), network=net(links, AllReduce("gloo", tuple(HOSTS), 4, slower))),
               base)
    [ar] = [f for f in fs if f.data.get("kind") == "allreduce"]
    assert ar.status is Status.WARN and ar.hosts == ("node03",)
    fs = audit(replace(good(), network=net(survey(HOSTS, lambda s, r: 9.4 * G),
                                           AllReduce("gloo", tuple(HOSTS), 4, slower))), base)
    [ar] = [f for f in fs if f.data.get("kind") == "allreduce"]
    assert ar.status is Status.FAIL and ar.hosts == tuple(HOSTS)


def test_mtu_difference_uses_the_job_interface():
    base = recorded(good())
    odd = NetworkFacts((Interface("eth0", 9000, "up", 10000, ("10.0.0.1/24",)),),
                       default_route="eth0")
    fs = audit(replace(cluster(node01={"network": odd}), network=None), base)
    assert [(f.data.get("field"), f.message.split(" in the")[0]) for f in fs
            if f.status is Status.FAIL] == [("mtu", "node01: MTU 9000 != 1500")]


BAD_BASELINES = [
    ("not-a-baseline", {}, "field 'baseline': not a baseline"),
    ("version", {"baseline_version": 9}, "field 'baseline.baseline_version'"),
    ("taken-at", {"taken_at": "yesterday"}, "field 'baseline.taken_at': expected a number"),
    ("profiles-empty", {"profiles": {}}, "field 'baseline.profiles'"),
    ("profile-field", {"profiles": {"n1": {"paddle": ["3"]}}},
     "host 'n1': field 'baseline.profiles': paddle: expected a string"),
    ("profile-unknown-key", {"profiles": {"n1": {"colour": "red"}}}, "unknown field 'colour'"),
    ("link", {"link_bps": -1}, "field 'baseline.link_bps'"),
]


@pytest.mark.parametrize("patch,fragment", [c[1:] for c in BAD_BASELINES],
                         ids=[c[0] for c in BAD_BASELINES])
def test_malformed_baseline_is_one_input_error(patch, fragment):
    c = good()
    sec = B.section(c.outcomes, c.network, NOW, None)
    doc = {"baseline": None if not patch else dict(sec, **patch)}
    with pytest.raises(InputError) as e:
        B.from_document("b.json", json.loads(json.dumps(doc)))
    assert str(e.value).startswith("b.json: ") and fragment in str(e.value)


# ---------------------------------------------------------------- diff
def report(c: Cluster) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(json.dumps(jsonreport.jsonable(
        jsonreport.document(c, judge(c, run_checks(c))))))
    return doc


def test_diff_names_facts_findings_and_links_that_changed_not_noise():
    a = report(good())
    changed = cluster(node01={}, node02={"paddle": paddle("2.6.2")}, node03={}, node04={})
    links = survey(HOSTS, slow_host("node03", 0.1 * G, 9.4 * G))
    b = report(replace(changed, network=net(links)))
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
