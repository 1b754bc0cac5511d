"""ps-fanin on measured fan-ins (no network here): a server host's fan-in against what a
healthy host's link carries, with the cause said once."""

from __future__ import annotations

from dataclasses import replace

from support import NODES, G, cpu, link, net_tests, slow_host, survey, with_network

from preflight.checks import ps_fanin
from preflight.model.findings import Status
from preflight.model.measure import RETEST, FanIn, IperfResult
from preflight.model.plan import Endpoint, Plan
from preflight.model.policy import JobShape
from preflight.network.fanin import fanin_pairs


def fan(receiver: str, **each: float | None) -> FanIn:
    return FanIn(receiver, {s: IperfResult(received_bps=b) if b else IperfResult(error="refused")
                            for s, b in each.items()})


def judged(links, *fans: FanIn, **cpus):
    c = with_network(replace(net_tests(links), fanin=fans))
    if cpus:
        c = replace(c, outcomes=tuple(
            replace(o, facts=replace(o.facts, cpu=cpus[o.host.name]))
            if o.host.name in cpus and o.facts else o for o in c.outcomes))
    return list(ps_fanin.check(c))


HEALTHY = survey(NODES, lambda s, r: 9.4 * G)


def test_a_server_that_takes_its_trainers_at_full_rate_passes():
    [f] = judged(HEALTHY, fan("node01", node02=3.1 * G, node03=3.1 * G, node04=3.0 * G))
    assert f.status is Status.PASS and f.hosts == ("node01",)


def test_a_server_whose_link_cannot_take_the_fan_in_is_named_with_its_role():
    # Each pair alone at 9.4 Gbit/s, all three at once 1.5 in all: the fan-in's own deficit.
    found = judged(HEALTHY, fan("node01", node02=0.5 * G, node03=0.5 * G, node04=0.5 * G),
                   fan("node02", node01=3.1 * G, node03=3.1 * G, node04=3.0 * G))
    bad = [f for f in found if f.status is Status.FAIL]
    assert [f.hosts for f in bad] == [("node01",)]
    assert "node01 (PS server): its 3 trainer host(s) at once deliver 1.5 Gbit/s" in \
        bad[0].message and "cannot take its trainers' pushes at once" in bad[0].message
    assert [f.hosts for f in found if f.status is Status.PASS] == [("node02",)]


def test_a_slow_link_is_said_as_the_cause():
    links = survey(NODES, slow_host("node03", 0.1 * G, 9.4 * G)) + [
        link("node03", "node01", 0.1 * G, RETEST), link("node01", "node03", 0.1 * G, RETEST)]
    [f] = judged(links, fan("node03", node01=0.03 * G, node02=0.03 * G, node04=0.03 * G))
    assert f.status is Status.FAIL and "its slow link (bandwidth) holds every trainer" in f.message


def test_a_starved_cpu_is_said_as_the_cause():
    [f] = judged(HEALTHY, fan("node01", node02=0.5 * G, node03=0.5 * G, node04=0.5 * G),
                 node01=cpu(effective=0.25))
    assert f.status is Status.FAIL and "explained by its CPU" in f.message


def test_a_failed_run_is_could_not_check():
    [f] = judged(HEALTHY, fan("node01", node02=3 * G, node03=None))
    assert f.status is Status.COULD_NOT_CHECK and "node03: refused" in f.message


def test_no_fan_in_no_finding():
    assert judged(HEALTHY) == []


def test_every_trainer_host_sends_to_every_server_host_but_its_own():
    def ep(h: str, port: int) -> Endpoint:
        return Endpoint(h, f"10.0.0.{h[-1]}", port)
    plan = Plan("ps", JobShape(), servers=(ep("n1", 6070), ep("n2", 6070)),
                workers=(ep("n1", 6071), ep("n3", 6070), ep("n3", 6071), ep("n4", 6070)))
    assert fanin_pairs(plan) == {"n1": ("n3", "n4"), "n2": ("n1", "n3", "n4")}
    assert fanin_pairs(Plan("collective", JobShape(), workers=(ep("n1", 6070),))) == {}
