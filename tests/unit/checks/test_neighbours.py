"""The neighbour table holds the job's mesh: per table, the entries the job needs (a peer on
the job's subnet each, and the host's own others) against gc_thresh3 (fail) and gc_thresh2
(warn); hosts that report one table id share one kernel and one table."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Optional

from support import cluster

from preflight.checks import neighbours
from preflight.model import facts as F
from preflight.model.cluster import Cluster
from preflight.model.findings import Status


def net(ip: str, table: Optional[F.NeighbourTable], prefix: int = 24,
        error: Optional[str] = None) -> F.NetworkFacts:
    return F.NetworkFacts((F.Interface("eth0", 1500, "up", 10000, (f"{ip}/{prefix}",)),),
                          default_route="eth0", neighbours=None if table is None else (table,),
                          neighbours_error=error)


def hosts(n: int, table: F.NeighbourTable, subnet: str = "10.0.0") -> Cluster:
    c = cluster(**{f"node{i:02d}": {"network": net(f"{subnet}.{i}", table)}
                   for i in range(1, n + 1)})
    # The inventory's addresses are the job interfaces'.
    return replace(c, outcomes=tuple(
        replace(o, host=replace(o.host, address=f"{subnet}.{i}"))
        for i, o in enumerate(c.outcomes, 1)))


def table(t3: int, t2: Optional[int] = None, table_id: Optional[int] = None,
          **kw: Any) -> F.NeighbourTable:
    return F.NeighbourTable("ipv4", (t2 or t3 // 2) // 4, t2 or t3 // 2, t3,
                            table_id=table_id, **kw)


def bad(c: Cluster) -> list[Any]:
    return [f for f in neighbours.check(c) if f.status is not Status.PASS]


def test_hosts_with_their_own_default_tables_hold_a_small_mesh():
    [f] = list(neighbours.check(hosts(6, table(1024))))
    assert f.status is Status.PASS and len(f.hosts) == 6
    assert f.message == "neighbour tables hold the job's mesh (5 peers a host) within " \
        "gc_thresh2 on 6 hosts"


def test_a_table_smaller_than_the_mesh_fails_each_host_with_the_sysctl_that_fixes_it():
    # 40 hosts on one /24: 39 peers each, plus 16 of the host's own: 55 > 48.
    found = bad(hosts(40, table(48, 24)))
    assert len(found) == 40 and all(f.status is Status.FAIL for f in found)
    f = found[0]
    assert f.message.startswith("node01: neighbour table too small: the job's mesh needs 55 "
                                "entries in node01's ipv4 table (a peer each and the hosts' "
                                "own others), past gc_thresh3 48: connections to some ranks "
                                "will fail or time out; sysctl -w "
                                "net.ipv4.neigh.default.gc_thresh3=1024 "
                                "net.ipv4.neigh.default.gc_thresh2=512 "
                                "net.ipv4.neigh.default.gc_thresh1=128"), f.message
    assert f.data["need"] == 55 and f.data["thresh3"] == 48


def test_hosts_sharing_one_kernel_share_one_table_and_are_counted_together():
    # Five namespaces of one machine (one table id): each needs its 4 peers, together 20,
    # with the machine's own 16 and each namespace's way out: 40 > 32. Alone, 20 would fit.
    shared = table(32, 16, table_id=3475316065)
    [f] = bad(hosts(5, shared))
    assert f.status is Status.FAIL and f.hosts == tuple(f"node0{i}" for i in range(1, 6))
    assert f.message.startswith("node[01-05]: neighbour table too small: the job's mesh needs "
                                "40 entries in the one ipv4 table they share (one kernel)"), \
        f.message
    own = bad(hosts(5, replace(shared, table_id=None)))  # own tables: 20 each, within 32
    assert own and all(f.status is Status.WARN for f in own)


def test_a_mesh_past_gc_thresh2_warns():
    [*found] = bad(hosts(12, table(64, 16)))  # 11 + 16 = 27: past 16, within 64
    assert {f.status for f in found} == {Status.WARN}
    assert "past gc_thresh2 16 (of gc_thresh3 64): entries are reclaimed within seconds of " \
        "going idle" in found[0].message


def test_only_peers_on_the_job_subnet_take_entries():
    # node01 alone on its /24 reaches the other 39 through its gateway: one entry, counted
    # in its own others; the 39 on theirs need 38 peers each.
    c = hosts(40, table(48, 24))
    first = c.outcomes[0]
    assert first.facts is not None
    lone = replace(first, host=replace(first.host, address="10.9.0.1"),
                   facts=replace(first.facts, network=net("10.9.0.1", table(48, 24))))
    c = replace(c, outcomes=(lone, *c.outcomes[1:]))
    found = {f.hosts[0]: f for f in bad(c)}
    assert "node01" not in found and found["node02"].data["need"] == 38 + 16


def test_an_unread_table_could_not_be_checked_and_an_older_record_is_n_a():
    c = cluster(a={"network": net("10.0.0.1", None, error="netlink error -13")},
                b={"network": net("10.0.0.2", None)})
    by = {f.hosts[0]: f for f in neighbours.check(c)}
    assert by["a"].status is Status.COULD_NOT_CHECK and "netlink error -13" in by["a"].message
    assert by["b"].status is Status.SKIP


def test_each_host_counts_the_other_hosts_on_its_own_subnet_or_all_where_it_is_unknown():
    eth = lambda *a: F.Interface("eth0", 1500, "up", 10000, tuple(a))  # noqa: E731
    ifaces = {"a1": eth("10.0.0.1/24"), "a2": eth("10.0.0.2/24"), "a3": eth("10.0.0.3/24"),
              "b1": eth("10.0.1.1/24"), "b2": eth("10.0.1.2/24"),
              "both": eth("10.0.0.9/24", "10.0.1.9/24"), "none": None}
    addresses = {"a1": "10.0.0.1", "a2": "10.0.0.2", "a3": "10.0.0.3", "b1": "10.0.1.1",
                 "b2": "10.0.1.2", "both": "10.0.0.9", "none": "n7.example"}
    peers = neighbours.peers_on_subnet(ifaces, addresses)
    # Its subnet's others, and the host named but not resolved (its address unknown); a
    # host on two subnets is reached at its inventory address (10.0.0.9: not b's subnet).
    assert peers == {"a1": 3 + 1, "a2": 4, "a3": 4, "b1": 1 + 1, "b2": 2,
                     "both": 5 + 1, "none": 6}
