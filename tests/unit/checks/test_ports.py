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


def test_a_timeout_between_hosts_whose_neighbour_table_is_full_is_that_tables_not_a_firewall():
    # The four hosts share one kernel whose table cannot hold their mesh (gc_thresh3 16): the
    # neighbours check names it with the sysctl; the ports that timed out between them are
    # its evidence, folded into its finding, never "a firewall".
    from preflight.judge import run_checks
    small = F.NeighbourTable("ipv4", 2, 8, 16, table_id=7)
    reach = tuple(PortReach(h, (6070,), reached_from=tuple(x for x in NODES if x != h),
                            unreached={"node02": "6070: timed out twice (the second alone, "
                                                  "10 s)"} if h == "node01" else {})
                  for h in NODES)
    c = with_network(replace(net_tests(survey(NODES, lambda s, r: 9.4 * G)), reach=reach))
    def small_table(facts: F.HostFacts | None) -> F.HostFacts:
        assert facts is not None and isinstance(facts.network, F.NetworkFacts)
        return replace(facts, network=replace(facts.network, neighbours=(small,)))
    c = replace(c, outcomes=tuple(replace(o, facts=small_table(o.facts)) for o in c.outcomes))
    found = [f for f in run_checks(c) if f.status is not Status.PASS
             and f.check in ("ports", "neighbours")]
    assert [f.check for f in found] == ["neighbours"], [(f.check, f.message) for f in found]
    assert "firewall" not in found[0].message
    assert "it explains what ports saw: the job's ports did not answer between node01, " \
        "node02" in found[0].message
    assert found[0].data["evidence"][0]["message"].startswith("node01: its job ports 6070 do "
                                                              "not answer from node02")


def test_a_ps_trainer_reaches_its_servers_alone_and_is_not_cut_off_by_the_others():
    # node03 and node04 train: they try the servers' ports (node01, node02), not each
    # other's. node03 reaching neither server is cut off; node04 reaching both is fine.
    servers = ("node01", "node02")
    reach = tuple(PortReach(h, (6070,), "server" if h in servers else "trainer",
                            reached_from=tuple(x for x in NODES if x != h) if h in servers
                            else (), unreached={"node03": "6070: timed out twice"}
                            if h in servers else {}) for h in NODES)
    c = with_network(replace(net_tests(survey(NODES, lambda s, r: 9.4 * G)), reach=reach))
    fs = list(ports.check(c))
    assert messages(fs, Status.FAIL) == [
        "node03 (trainer): reaches none of the plan's other hosts on their job ports (6070: "
        "timed out twice): a firewall there blocks its way out; open the plan's ports "
        "between the job's hosts"]
    [ok] = [f for f in fs if f.status is Status.PASS]
    assert ok.message.endswith("the plan's ports answer from host to host on node01, node02")


def test_the_job_pairs_are_the_mesh_for_a_collective_job_and_the_servers_for_a_ps_job():
    from support import cluster as make_cluster

    from preflight.model.policy import JobShape
    from preflight.network.port_reach import job_pairs
    from preflight.placement.planner import plan
    c = make_cluster(**{n: {"gpu": F.GpuFacts("none")} for n in ("a", "b", "c", "d")})
    ips = {o.host.name: o.host.address for o in c.outcomes}
    collective = plan(c, [], ips)
    mesh = job_pairs(collective)
    for node in collective.nodes:  # every other host's every port: the ranks and the master
        assert sorted(mesh[node.host]) == sorted(
            (n.host, p) for n in collective.nodes if n.host != node.host for p in n.ports)
    ps = plan(replace(c, policy=Policy(mode="ps", job=JobShape(server_num=1, trainer_num=3))),
              [], ips)
    pairs = job_pairs(ps)
    [server] = {e.host for e in ps.servers}
    for src, to in pairs.items():
        assert {h for h, _ in to} <= {server}, (src, to)  # servers and the rendezvous only
        assert (src == server) == (not to)
