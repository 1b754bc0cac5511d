"""The active tests' orchestration on facts: which suspects are retested, who takes part in the
all-reduce with which backend and interface."""

from __future__ import annotations

from support import G, cluster, gpu, link, same, slow_host, survey, uneven

from preflight.model import facts as F
from preflight.model.measure import NetworkTests
from preflight.model.policy import Limits
from preflight.network.orchestrate import (
    NetworkOptions,
    allreduce_members,
    retest_pairs,
    run_allreduce_stage,
)
from preflight.network.schedule import matrix_rounds
from preflight.transport.local.run import LocalRemote


def test_retests_put_each_suspect_against_the_best_healthy_host():
    hosts = ["a", "b", "c", "d"]
    links = survey(hosts, slow_host("c"))
    links = [link(r.sender, r.receiver, 12 * G) if (r.sender, r.receiver) == ("b", "a")
             else r for r in links]  # b and a share the best link; a comes first by name
    # And the fastest healthy link, measured again beside them: the suspects' yardstick in
    # the same minutes.
    assert retest_pairs(links, Limits()) == ([("c", "a"), ("a", "c")], ("b", "a"))


def test_many_suspect_hosts_are_retested_against_several_healthy_hosts():
    # A survey whose many pairs at once contended for what they share (a switch uplink, the
    # CPUs of a virtualised rig) leaves many suspects: every one is retested, spread over the
    # best healthy hosts so that their retests can run side by side.
    hosts = [f"h{i:02d}" for i in range(30)]
    slow = set(hosts[::3])  # 10 hosts (no healthy one between two): more than are retested
    # one at a time
    links = survey(hosts, lambda s, r: 1 * G if s in slow or r in slow else 10 * G)
    pairs, beside = retest_pairs(links, Limits())
    assert {h for p in pairs for h in p} >= slow
    refs = {h for p in pairs for h in p} - slow
    assert len(refs) == 4 and not refs & slow
    assert len(pairs) == 2 * len(slow) <= 32
    assert beside is not None and not set(beside) & slow


def test_with_every_host_suspect_each_is_retested_against_the_best_host_left():
    # Unretested, the survey alone would blame a host (as it once did on a clean rig).
    pairs, beside = retest_pairs(uneven(), Limits())
    # g1 sends slowly: to the best receiver left, g3 (both are suspect receivers); g2
    # receives slowly: from the best sender left, g3; g3 both ways: to g1, which receives
    # fine, and from g2, which sends fine.
    assert sorted(pairs) == [("g1", "g3"), ("g2", "g3"), ("g3", "g1"), ("g3", "g2")]
    # Beside them, the one link no suspicion touches in its direction.
    assert beside == ("g2", "g1")


def test_retests_repeat_a_slow_path_itself():
    hosts = ["a", "b", "c", "d"]
    links = survey(hosts, lambda s, r: 1 * G if (s, r) == ("a", "c") else 10 * G,
                   matrix_rounds)
    [path], beside = retest_pairs(links, Limits())
    assert path == ("a", "c") and beside != path and beside in {
        (r.sender, r.receiver) for r in links}
    # Nothing to retest: no healthy link either.
    assert retest_pairs(survey(hosts, lambda s, r: 10 * G), Limits()) == ([], None)


def members_of(c):
    remotes = {o.host.name: LocalRemote(o.host.name) for o in c.outcomes}
    return allreduce_members(c.outcomes, remotes)


def test_cpu_hosts_run_gloo_on_the_interface_holding_their_address():
    c = cluster(**same(3, gpu=F.GpuFacts("none")))
    # Give each host an eth0 with its inventory address, and one a GLOO_SOCKET_IFNAME.
    outs = []
    for o in c.outcomes:
        env = F.EnvFacts((("GLOO_SOCKET_IFNAME", "bond0"),) if o.host.name == "node03" else ())
        net = F.NetworkFacts((F.Interface("eth0", 1500, "up", None,
                                          (f"{o.host.address}/24",)),), "eth0")
        outs.append(o.__class__(o.host, facts=F.HostFacts(**{
            **o.facts.__dict__, "network": net, "env": env})))
    members, backend, left = members_of(c.__class__(tuple(outs)))
    assert backend == "gloo" and left == {}
    assert [(m.nproc, m.gloo_ifname) for m in members] == [(1, "eth0"), (1, "eth0"), (1, None)]


def test_gpu_hosts_run_nccl_with_the_smallest_gpu_count_and_leave_out_odd_hosts():
    c = cluster(node01={"gpu": gpu(8)}, node02={"gpu": gpu(4)},
                node03={"gpu": F.GpuFacts("none")},
                node04={"paddle": F.PaddleFacts("/usr/bin/python3", False, "No module")})
    members, backend, left = members_of(c)
    assert backend == "nccl" and [m.name for m in members] == ["node01", "node02"]
    assert {m.nproc for m in members} == {4}
    assert left == {"node03": "has no GPU while others do",
                    "node04": "Paddle is not importable"}


def test_a_host_holding_the_launchers_ports_is_left_out_with_the_port():
    c = cluster(node01={"gpu": F.GpuFacts("none")},
                node02={"gpu": F.GpuFacts("none"), "ports": F.PortsFacts((22, 36001))})
    members, _, left = members_of(c)
    assert [m.name for m in members] == ["node01"]
    assert left == {"node02": "port 36001 is already in use (the all-reduce needs "
                              "36000-36003; see --allreduce-port)"}


def test_hosts_the_plan_leaves_out_are_not_ranks_and_say_why():
    c = cluster(**same(3, gpu=F.GpuFacts("none")))
    remotes = {o.host.name: LocalRemote(o.host.name) for o in c.outcomes}
    net = NetworkTests("ring", ("node01", "node02", "node03"))
    keep = {"node02": "bandwidth: node02: slow host", "node03": "paddle-stack: 2.6.2"}
    out = run_allreduce_stage(net, c.outcomes, remotes, NetworkOptions(), keep)
    # One rank left: nothing runs (no command starts with fewer than two members).
    assert out.allreduce is None
    assert out.allreduce_skipped == ("needs 2 or more hosts with Paddle that the plan keeps, "
                                     "found 1")
    assert out.allreduce_left_out == keep and out.skipped == {}


def test_the_all_reduce_stage_keeps_out_of_the_way_when_turned_off_or_interrupted():
    c = cluster(**same(2))
    remotes = {o.host.name: LocalRemote(o.host.name) for o in c.outcomes}
    off = NetworkTests("ring", ("node01", "node02"), allreduce_skipped="turned off")
    assert run_allreduce_stage(off, c.outcomes, remotes, NetworkOptions(run_allreduce=False)) \
        is off
    stopped = NetworkTests("ring", ("node01", "node02"), interrupted=True)
    assert run_allreduce_stage(stopped, c.outcomes, remotes, NetworkOptions()) is stopped


def test_nccl_runs_add_a_256_mib_size_to_the_defaults(monkeypatch):
    from preflight.network import orchestrate
    seen = []

    def fake(members, backend, opts, on_progress=None):
        seen.append((backend, opts.sizes_mib))
        from preflight.model.measure import AllReduce
        return AllReduce(backend, tuple(m.name for m in members), len(members))

    monkeypatch.setattr(orchestrate, "run_allreduce", fake)
    c = cluster(**same(2, gpu=gpu(n=1)))
    remotes = {o.host.name: LocalRemote(o.host.name) for o in c.outcomes}
    net = NetworkTests("ring", ("node01", "node02"))
    run_allreduce_stage(net, c.outcomes, remotes, NetworkOptions())
    assert seen and seen[0][0] == "nccl" and 256.0 in seen[0][1]


def test_hosts_sharing_a_kernel_are_counted_together_over_their_cores():
    from dataclasses import replace as _replace

    from support import cpu, host_facts, net_facts, outcome

    from preflight.model.facts import NeighbourTable
    from preflight.network.orchestrate import _crowding
    from preflight.network.paddle_job import Member

    def facts(table_id, cores):
        net = _replace(net_facts(), neighbours=(NeighbourTable("ipv4", 128, 512, 1024,
                                                               table_id=table_id),))
        return host_facts(network=net, cpu=cpu(effective=cores))

    shared = [outcome(f"h{i}", facts(7, 1.0)) for i in range(3)]
    members = [Member(f"h{i}", None, "python3", f"10.0.0.{i}") for i in range(3)]  # type: ignore[arg-type]
    assert _crowding(shared, members) == 6.0  # 3 launchers + 3 ranks on one core
    apart = [outcome(f"h{i}", facts(i, 16.0)) for i in range(3)]
    assert _crowding(apart, members) == 2 / 16  # each its own kernel of 16 cores
