"""The allreduce check on all-reduce measurements (no network here)."""

from __future__ import annotations

from dataclasses import replace

from support import NODES, G, net_tests, slow_host, survey, with_network

from preflight.checks import allreduce
from preflight.model.facts import IbPort, NetworkFacts
from preflight.model.findings import Status
from preflight.model.measure import (
    AllReduce,
    SizeResult,
)


def ar(backend="gloo", busbw_gbytes=1.0, ranks=4, **kw) -> AllReduce:
    # busbw = algbw * 2(n-1)/n: choose the time that gives the wanted busbw for 32 MiB.
    nbytes = 32 << 20
    seconds = nbytes * 2 * (ranks - 1) / ranks / (busbw_gbytes * 1e9)
    return AllReduce(backend, tuple(NODES), ranks, (SizeResult(nbytes, seconds, ranks),), **kw)


def test_busbw_is_algbw_times_two_n_minus_one_over_n():
    s = SizeResult(1000, 1.0, 4)
    assert s.algbw == 1000 and s.busbw == 1500


def test_gloo_reports_busbw_and_passes_without_a_floor():
    links = survey(NODES, lambda s, r: 10 * G)
    [f] = allreduce.check(with_network(net_tests(links, ar())))
    assert f.status is Status.PASS and "busbw 1 GB/s" in f.message and f.hosts == tuple(NODES)


def test_nccl_far_below_the_slowest_link_fails_naming_the_log():
    links = survey(NODES, lambda s, r: 100 * G)  # 12.5 GB/s links
    hints = {"node01": "NCCL INFO NET/Socket : Using [0]eth0:10.0.0.1<0>"}
    [f] = allreduce.check(with_network(net_tests(links, ar("nccl", 1.0, logs=hints))))
    assert f.status is Status.FAIL
    assert "far below the slowest link (12.5 GB/s)" in f.message and "NET/Socket" in f.message
    [ok] = allreduce.check(with_network(net_tests(links, ar("nccl", 10.0))))
    assert ok.status is Status.PASS


def test_slow_host_explains_a_low_busbw_and_is_not_blamed_on_everyone():
    links = survey(NODES, slow_host("node02", rate=1 * G, fast=100 * G))
    [f] = allreduce.check(with_network(net_tests(links, ar("nccl", 0.12))))
    assert f.status is Status.PASS and "explained by slow node02" in f.message
    [g] = allreduce.check(with_network(net_tests(links, ar("gloo", 0.12)), busbw_min_gbytes=1))
    assert g.status is Status.PASS and "explained by slow node02" in g.message


def test_policy_floor_fails_when_nothing_explains_it():
    links = survey(NODES, lambda s, r: 10 * G)
    [f] = allreduce.check(with_network(net_tests(links, ar("gloo", 0.5)), busbw_min_gbytes=1))
    assert f.status is Status.FAIL and "below the policy floor 1 GB/s" in f.message


def test_failed_rank_names_its_host_and_log():
    run = ar(error="the rank on node03 failed first; stopped the launcher on node01",
             failed={"node03": "RuntimeError: Unable to find address for: nope0"})
    [f] = allreduce.check(with_network(net_tests([], run)))
    assert f.status is Status.FAIL and f.hosts == ("node03",)
    assert "Unable to find address for: nope0" in f.message


def test_not_run_is_could_not_check_unless_turned_off():
    [f] = allreduce.check(with_network(net_tests(
        [], ar_skipped="needs 2 or more hosts with Paddle, found 1")))
    assert f.status is Status.COULD_NOT_CHECK and "found 1" in f.message
    assert list(allreduce.check(with_network(net_tests([], ar_skipped="turned off")))) == []
    left = net_tests([], ar(), skipped={"node04": "no all-reduce: Paddle is not importable"})
    fs = list(allreduce.check(with_network(left)))
    assert [f.message for f in fs if f.status is Status.COULD_NOT_CHECK] == [
        "node04: no all-reduce: Paddle is not importable"]


def test_the_pass_names_the_ranks_the_hosts_left_out_and_what_the_budget_dropped():
    links = survey([*NODES, "node05"], slow_host("node05", 0.02 * G, 1 * G))
    run = ar(budget_s=30.0, dropped=("32 MiB (~22 s over 4 ranks at the slowest link, past "
                                     "the 30 s budget)",))
    net = replace(net_tests(links, run, hosts=[*NODES, "node05"]),
                  allreduce_left_out={"node05": "bandwidth: node05: slow host"})
    [f] = allreduce.check(with_network(net))
    assert f.status is Status.PASS and f.hosts == tuple(NODES)
    assert f.message.startswith("gloo all-reduce over 4 ranks on node01, node02, node03, "
                                "node04: 32 MiB: busbw 1 GB/s")
    assert "; not ranks, left out by the plan: node05" in f.message
    assert "; within the 30 s budget, dropped: 32 MiB (~22 s" in f.message
    assert f.data["left_out"] == {"node05": "bandwidth: node05: slow host"}


def test_gloo_where_nccl_was_expected_fails_and_its_figures_pass_nothing():
    # GPU hosts whose Paddle sees no GPU fall back to gloo: a pass there would be a lie.
    links = survey(NODES, lambda s, r: 10 * G)
    [f] = allreduce.check(with_network(net_tests(links, ar("gloo", expected="nccl"))))
    assert f.status is Status.FAIL and f.hosts == tuple(NODES)
    assert "ran gloo where nccl was expected: Paddle on the ranks sees no GPU" in f.message
    [ok] = allreduce.check(with_network(net_tests(links, ar("gloo", expected="gloo"))))
    assert ok.status is Status.PASS


def rdma_cluster(run: AllReduce, ports=(("mlx5_0", "ACTIVE"), ("mlx5_1", "ACTIVE")),
                 rate=200.0):
    """Four 8-GPU hosts with RDMA ports at rate Gb/s, 10 Gbit/s TCP links between them."""
    c = with_network(net_tests(survey(NODES, lambda s, r: 10 * G), run))
    ib = tuple(IbPort(dev, 1, state, rate, "InfiniBand") for dev, state in ports)
    outcomes = []
    for o in c.outcomes:
        assert o.facts is not None and isinstance(o.facts.network, NetworkFacts)
        net = replace(o.facts.network, ib_ports=ib, infiniband=tuple(d for d, _ in ports))
        outcomes.append(replace(o, facts=replace(o.facts, network=net)))
    return replace(c, outcomes=tuple(outcomes))


IB_LOG = ("Using network IB; NET/Plugin : No plugin found (libnccl-net.so); "
          "NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB ; OOB eth0:10.0.0.1<0>")
SOCKET_LOG = ("Using network Socket; NET/IB : No device found.; "
              "NET/Socket : Using [0]eth0:10.0.0.1<0>")


def test_nccl_on_sockets_where_rdma_ports_are_active_fails_naming_the_host():
    logs = {"node01": IB_LOG, "node02": SOCKET_LOG, "node03": IB_LOG, "node04": IB_LOG}
    fs = list(allreduce.check(rdma_cluster(ar("nccl", 20.0, logs=logs))))
    [fell] = [f for f in fs if f.status is Status.FAIL]
    assert fell.hosts == ("node02",) and fell.message.startswith(
        "node02: NCCL fell back to TCP sockets (NET/Socket) although mlx5_0/1, mlx5_1/1 are "
        "ACTIVE: its collectives crossed TCP, not the RDMA fabric")
    # The same sockets on hosts without RDMA ports are the only way NCCL has: no finding.
    [ok] = allreduce.check(with_network(net_tests(survey(NODES, lambda s, r: 10 * G), ar(
        "nccl", 20.0, logs={n: SOCKET_LOG for n in NODES}))))
    assert ok.status is Status.PASS
    # And one host crosses no network at all.
    one = ar("nccl", 20.0, logs={"node01": SOCKET_LOG})
    one = replace(one, hosts=("node01",))
    assert [f.status for f in allreduce.check(rdma_cluster(one))] == [Status.PASS]


def big_ar(busbw_gbytes: float, mib: int, **kw) -> AllReduce:
    ranks = 32
    nbytes = mib << 20
    seconds = nbytes * 2 * (ranks - 1) / ranks / (busbw_gbytes * 1e9)
    return AllReduce("nccl", tuple(NODES), ranks, (SizeResult(nbytes, seconds, ranks),), **kw)


def test_nccl_on_the_fabric_is_held_to_the_fabrics_rate_not_only_the_tcp_links():
    logs = {n: IB_LOG for n in NODES}
    # Two ACTIVE 200 Gb/s ports a host (the 8 ranks use both): 50 GB/s; a quarter is 12.5.
    # 5 GB/s is four times the 10 Gbit/s TCP links, and far below the fabric.
    [f] = allreduce.check(rdma_cluster(big_ar(5.0, 256, logs=logs)))
    assert f.status is Status.FAIL and f.data["fabric_bps"] == 400e9
    assert "far below the RDMA fabric (50 GB/s on the slowest host)" in f.message
    # Without the large size the fabric's rate is not shown: a warning that says so.
    [w] = allreduce.check(rdma_cluster(big_ar(5.0, 32, logs=logs)))
    assert w.status is Status.WARN and "measured up to 32 MiB only" in w.message
    [ok] = allreduce.check(rdma_cluster(big_ar(40.0, 256, logs=logs)))
    assert ok.status is Status.PASS
    # A host whose ports are all down has no fabric rate: held to the TCP links only.
    down = rdma_cluster(big_ar(5.0, 256, logs=logs), ports=(("mlx5_0", "DOWN"),))
    assert [f.status for f in allreduce.check(down)] == [Status.PASS]
