"""The ports check: the launcher's ports are free."""

from __future__ import annotations

from dataclasses import replace

from support import NODES, G, cluster, messages, net_tests, survey, with_network

from preflight.checks import ports
from preflight.model import facts as F
from preflight.model.findings import Finding, Status
from preflight.model.measure import PortReach
from preflight.model.policy import Policy


def test_ports_named_by_the_policy_must_be_free():
    c = cluster(a={"ports": F.PortsFacts((22, 6070, 6071))}, b={"ports": F.PortsFacts((22,))},
                c={"ports": F.SectionError("no /proc/net/tcp")})
    c = replace(c, policy=Policy(ports=(*range(6070, 6078), 6767)))
    fs = list(ports.check(c))
    assert messages(fs, Status.FAIL) == [
        "a: port 6070-6071 already in use (the launcher needs 6070-6077, 6767): stop the old "
        "job or choose other ports"]
    assert messages(fs, Status.COULD_NOT_CHECK) == [
        "c: could not read listening ports: no /proc/net/tcp"]
    assert [f.hosts for f in fs if f.status is Status.PASS] == [("b",)]


def test_paddle_default_ports_taken_only_warn():
    # Without ports in the policy the plan picks free ones; a launch by hand would clash.
    c = cluster(a={"ports": F.PortsFacts((22, 6767))}, b={"ports": F.PortsFacts((22,))})
    fs = list(ports.check(c))
    assert messages(fs, Status.FAIL) == []
    assert messages(fs, Status.WARN) == [
        "a: port 6767 already in use: a launch with Paddle's default ports (6070-6077, 6767) "
        "would clash; the plan's ports are free"]


def reached(**unreached: dict[str, str]) -> list[Finding]:
    """The ports check on four hosts whose plan ports were tried from each other; unreached
    maps a host to {peer: what that peer got} for its ports it could not reach."""
    reach = tuple(PortReach(h, (6070, 6767) if h == "node01" else (6070,),
                            "server" if h in ("node01", "node02") else "trainer",
                            unreached=unreached.get(h, {})) for h in NODES)
    c = with_network(replace(net_tests(survey(NODES, lambda s, r: 9.4 * G)), reach=reach))
    return list(ports.check(c))


def test_ports_every_peer_reaches_pass_saying_so():
    [f] = reached()
    assert f.status is Status.PASS and f.hosts == tuple(NODES)
    assert f.message.endswith("free on 4 hosts; the plan's ports answer from host to host on "
                              "node01, node02, node03, node04")


def test_a_host_whose_ports_nobody_reaches_is_named_with_its_role_and_the_firewall():
    fs = reached(node01={p: "6070: timed out" for p in ("node02", "node03", "node04")})
    assert messages(fs, Status.FAIL) == [
        "node01 (server): its job ports 6070, 6767 do not answer from node02, node03, node04 "
        "(6070: timed out): a firewall drops them (the connection timed out); open them to the "
        "job's hosts"]
    [ok] = [f for f in fs if f.status is Status.PASS]
    assert ok.hosts == ("node02", "node03", "node04")
    assert ok.message.endswith("host to host on node02, node03, node04")


def test_a_refused_port_is_told_from_a_dropped_one():
    [bad] = [f for f in reached(node03={"node01": "6070: Connection refused"})
             if f.status is Status.FAIL]
    assert bad.hosts == ("node03",) and "rejected (connection refused" in bad.message


def test_a_host_that_reaches_nobody_is_the_one_named():
    # node04's own firewall blocks its way out: every other host's ports miss it alone.
    fs = reached(**{h: {"node04": "6070: timed out"} for h in ("node01", "node02", "node03")})
    [bad] = [f for f in fs if f.status is Status.FAIL]
    assert bad.hosts == ("node04",) and bad.message.startswith(
        "node04 (trainer): reaches none of the plan's other hosts on their job ports "
        "(6070: timed out): a firewall there blocks its way out")


def test_ports_that_could_not_be_tried_are_could_not_check():
    reach = (PortReach("node01", (6070,), "server", error="the listener did not start "
                       "within 10 s"),) + tuple(PortReach(h, (6070,)) for h in NODES[1:])
    c = with_network(replace(net_tests(survey(NODES, lambda s, r: 9.4 * G)), reach=reach))
    fs = list(ports.check(c))
    assert messages(fs, Status.COULD_NOT_CHECK) == [
        "node01: its plan ports' reach not tested: the listener did not start within 10 s"]
    assert [f.hosts for f in fs if f.status is Status.PASS] == [("node02", "node03", "node04")]
