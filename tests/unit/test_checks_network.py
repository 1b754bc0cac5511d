"""The bandwidth and all-reduce checks on measurements (no network here)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from support import G, cluster, link, same, slow_host, survey

from preflight.checks import allreduce, bandwidth
from preflight.iperf import IperfResult
from preflight.measure import RETEST, SURVEY, AllReduce, LinkRun, NetworkTests, SizeResult
from preflight.model import Cluster, Status
from preflight.netsched import matrix_rounds, ring_rounds
from preflight.policy import Limits, Policy

HOSTS = ["node01", "node02", "node03", "node04"]


def with_net(net: NetworkTests, **limits) -> Cluster:
    return replace(cluster(**same(len(net.hosts))), network=net,
                   policy=replace(Policy(), limits=replace(Limits(), **limits)))


def net(links, allreduce=None, skipped=None, hosts=HOSTS, ar_skipped=None) -> NetworkTests:
    return NetworkTests("ring", tuple(hosts), tuple(links), allreduce, ar_skipped,
                        skipped or {})


def by_status(findings):
    out: dict[Status, list[str]] = {}
    for f in findings:
        out.setdefault(f.status, []).extend(f.hosts)
    return out


# ---------------------------------------------------------------- bandwidth
def test_slow_host_confirmed_by_retest_fails_and_peers_pass():
    links = survey(HOSTS, slow_host("node03")) + [
        link("node03", "node01", 0.1 * G, RETEST), link("node01", "node03", 0.1 * G, RETEST)]
    fs = list(bandwidth.check(with_net(net(links))))
    assert by_status(fs) == {Status.FAIL: ["node03"],
                             Status.PASS: ["node01", "node02", "node04"]}
    [fail] = [f for f in fs if f.status is Status.FAIL]
    assert fail.message == (
        "node03: slow host: sends at most 100 Mbit/s and receives at most 100 Mbit/s with "
        "every peer (node02, node04); median host 10 Gbit/s; retest against node01: "
        "100 Mbit/s: check its NIC, cable, link speed (ethtool) and driver")


def test_suspect_fine_on_retest_is_not_blamed():
    links = survey(HOSTS, slow_host("node03", rate=3 * G)) + [
        link("node03", "node01", 9 * G, RETEST), link("node01", "node03", 9.5 * G, RETEST)]
    fs = list(bandwidth.check(with_net(net(links))))
    assert all(f.status is Status.PASS for f in fs)
    assert any("transient" in f.message and f.hosts == ("node03",) for f in fs)


@pytest.mark.parametrize("retest,status", [(6 * G, Status.WARN), (4 * G, Status.FAIL)],
                         ids=["between-half-and-three-quarters", "below-half"])
def test_tiers_relative_to_the_median_host(retest, status):
    links = survey(HOSTS, slow_host("node02", rate=retest)) + [
        link("node02", "node01", retest, RETEST), link("node01", "node02", retest, RETEST)]
    fs = list(bandwidth.check(with_net(net(links))))
    assert by_status(fs)[status] == ["node02"]


def test_slow_path_between_healthy_hosts():
    links = [link(s, r, 1 * G if (s, r) == ("node02", "node03") else 10 * G)
             for rnd in ring_rounds(HOSTS) for s, r in rnd]
    links.append(link("node02", "node03", 1.1 * G, RETEST))
    fs = list(bandwidth.check(with_net(net(links))))
    [fail] = [f for f in fs if f.status is Status.FAIL]
    assert fail.hosts == ("node02", "node03")
    assert fail.message.startswith("node02 -> node03: slow path, 1 Gbit/s while both hosts "
                                   "are fine with other peers")


def test_many_slow_paths_read_as_one_shared_bottleneck():
    hosts = [f"node{i:02d}" for i in range(1, 9)]
    slow_pairs = {("node01", "node05"), ("node02", "node06"), ("node03", "node07"),
                  ("node04", "node08"), ("node05", "node01")}
    links = survey(hosts, lambda s, r: 2 * G if (s, r) in slow_pairs else 10 * G,
                   matrix_rounds)
    fs = list(bandwidth.check(with_net(net(links, hosts=hosts))))
    [fail] = [f for f in fs if f.status is not Status.PASS]
    assert fail.status is Status.FAIL and len(fail.hosts) == 8
    assert fail.message.startswith("5 slow paths among 8 of 8 hosts")
    assert "shared bottleneck" in fail.message


def test_absolute_floor_fails_a_uniformly_slow_cluster():
    links = survey(HOSTS, lambda s, r: 1 * G)
    assert all(f.status is Status.PASS for f in bandwidth.check(with_net(net(links))))
    fs = list(bandwidth.check(with_net(net(links), link_min_gbps=10)))
    assert sorted(by_status(fs)[Status.FAIL]) == HOSTS
    assert "floor 10 Gbit/s" in fs[0].message and "not confirmed by a retest" in fs[0].message


def test_loss_on_a_link_warns():
    lossy = LinkRun("node01", "node02", SURVEY, IperfResult(
        received_bps=9.9 * G, sent_bps=10 * G, retransmits=50_000, sent_bytes=3.7e9, mss=1448))
    links = [lossy if (r.sender, r.receiver) == ("node01", "node02") else r
             for r in survey(HOSTS, lambda s, r: 10 * G)]
    fs = list(bandwidth.check(with_net(net(links))))
    [warn] = [f for f in fs if f.status is Status.WARN]
    assert warn.message.startswith("node01 -> node02: 2% of segments retransmitted (50000)")


def test_two_hosts_pass_with_a_note_that_nothing_was_compared():
    links = survey(["node01", "node02"], lambda s, r: 1 * G)
    [f] = bandwidth.check(with_net(net(links, hosts=["node01", "node02"])))
    assert f.status is Status.PASS and "fewer than 3 hosts" in f.message


def test_failed_runs_and_skipped_hosts_cannot_be_checked():
    links = survey(HOSTS[:3], lambda s, r: 10 * G) + [LinkRun(
        "node01", "node04", SURVEY, IperfResult(error="iperf3 is not installed on node04"))]
    fs = list(bandwidth.check(with_net(net(links, skipped={"node04": "iperf3 is not "
                                                           "installed"}))))
    assert sorted(f.message for f in fs if f.status is Status.COULD_NOT_CHECK) == [
        "node01 -> node04: iperf3 failed: iperf3 is not installed on node04",
        "node04: no iperf3 test: iperf3 is not installed"]


def test_no_measurements_no_findings():
    assert list(bandwidth.check(cluster(**same(2)))) == []


# ---------------------------------------------------------------- all-reduce
def ar(backend="gloo", busbw_gbytes=1.0, ranks=4, **kw) -> AllReduce:
    # busbw = algbw * 2(n-1)/n: choose the time that gives the wanted busbw for 32 MiB.
    nbytes = 32 << 20
    seconds = nbytes * 2 * (ranks - 1) / ranks / (busbw_gbytes * 1e9)
    return AllReduce(backend, tuple(HOSTS), ranks, (SizeResult(nbytes, seconds, ranks),), **kw)


def test_busbw_is_algbw_times_two_n_minus_one_over_n():
    s = SizeResult(1000, 1.0, 4)
    assert s.algbw == 1000 and s.busbw == 1500


def test_gloo_reports_busbw_and_passes_without_a_floor():
    links = survey(HOSTS, lambda s, r: 10 * G)
    [f] = allreduce.check(with_net(net(links, ar())))
    assert f.status is Status.PASS and "busbw 1 GB/s" in f.message and f.hosts == tuple(HOSTS)


def test_nccl_far_below_the_slowest_link_fails_naming_the_log():
    links = survey(HOSTS, lambda s, r: 100 * G)  # 12.5 GB/s links
    hints = {"node01": "NCCL INFO NET/Socket : Using [0]eth0:10.0.0.1<0>"}
    [f] = allreduce.check(with_net(net(links, ar("nccl", 1.0, logs=hints))))
    assert f.status is Status.FAIL
    assert "far below the slowest link (12.5 GB/s)" in f.message and "NET/Socket" in f.message
    [ok] = allreduce.check(with_net(net(links, ar("nccl", 10.0))))
    assert ok.status is Status.PASS


def test_slow_host_explains_a_low_busbw_and_is_not_blamed_on_everyone():
    links = survey(HOSTS, slow_host("node02", rate=1 * G, fast=100 * G))
    [f] = allreduce.check(with_net(net(links, ar("nccl", 0.12))))
    assert f.status is Status.PASS and "explained by slow node02" in f.message
    [g] = allreduce.check(with_net(net(links, ar("gloo", 0.12)), busbw_min_gbytes=1))
    assert g.status is Status.PASS and "explained by slow node02" in g.message


def test_policy_floor_fails_when_nothing_explains_it():
    links = survey(HOSTS, lambda s, r: 10 * G)
    [f] = allreduce.check(with_net(net(links, ar("gloo", 0.5)), busbw_min_gbytes=1))
    assert f.status is Status.FAIL and "below the policy floor 1 GB/s" in f.message


def test_failed_rank_names_its_host_and_log():
    run = ar(error="the rank on node03 failed first; stopped the launcher on node01",
             failed={"node03": "RuntimeError: Unable to find address for: nope0"})
    [f] = allreduce.check(with_net(net([], run)))
    assert f.status is Status.FAIL and f.hosts == ("node03",)
    assert "Unable to find address for: nope0" in f.message


def test_not_run_is_could_not_check_unless_turned_off():
    [f] = allreduce.check(with_net(net([], ar_skipped="needs 2 or more hosts with Paddle, "
                                       "found 1")))
    assert f.status is Status.COULD_NOT_CHECK and "found 1" in f.message
    assert list(allreduce.check(with_net(net([], ar_skipped="turned off")))) == []
    left = net([], ar(), skipped={"node04": "no all-reduce: Paddle is not importable"})
    fs = list(allreduce.check(with_net(left)))
    assert [f.message for f in fs if f.status is Status.COULD_NOT_CHECK] == [
        "node04: no all-reduce: Paddle is not importable"]
