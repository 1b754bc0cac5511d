"""The placement planner on facts: exclusions, alike workers, PS headroom, ports, prefixes."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any, Optional

import pytest
from support import G, cluster, cpu, gpu, host_facts, link, report_doc, same, slow_host, survey

from preflight.checks import bandwidth
from preflight.judge import judge
from preflight.model import facts as F
from preflight.model.cluster import Cluster
from preflight.model.findings import Finding, Status, Verdict
from preflight.model.host import Host, HostFailure, HostOutcome, Stage
from preflight.model.measure import NetworkTests, PsRound, PsServer, PsTrainer
from preflight.model.policy import JobShape, Limits, Mode, Policy
from preflight.placement.planner import plan
from preflight.report import build
from preflight.report.terminal import plan_lines


def node(name: str, ip: str, roles: tuple[str, ...] = ("worker", "server"),
         failure: Optional[HostFailure] = None, **sections: Any) -> HostOutcome:
    facts = None if failure else host_facts(
        network=F.NetworkFacts((F.Interface("eth0", 1500, "up", 10000, (f"{ip}/24",)),)),
        **sections)
    return HostOutcome(Host(name=name, address=ip, roles=roles), facts=facts, failure=failure)


def cpu_host(load: float = 0.1, effective: float = 16.0) -> F.CpuFacts:
    return replace(cpu(effective=effective, logical=max(1, int(effective))),
                   loadavg=(load, load, load))


def make(outcomes: list[HostOutcome], mode: Mode = "collective", findings: Sequence[Finding] = (),
         network: Optional[NetworkTests] = None, ports: Optional[tuple[int, ...]] = None,
         limits: Optional[Limits] = None, **shape: Any):
    c = Cluster(tuple(outcomes), Policy(mode=mode, ports=ports, limits=limits or Limits(),
                                        job=JobShape(**shape)), network)
    ips = {o.host.name: o.host.address for o in outcomes}
    p = plan(c, list(findings), ips)
    return c, p


def gpus(n: int) -> dict[str, Any]:
    return {"gpu": gpu(n=n)}


def cpu_only(**kw: Any) -> dict[str, Any]:
    return {"gpu": F.GpuFacts(source="none"), "cpu": cpu_host(**kw)}


# ---------------------------------------------------------------- collective
def test_collective_plan_on_alike_gpu_hosts():
    _, p = make([node(f"n{i}", f"10.0.0.{i}", **gpus(8)) for i in (1, 2, 3)])
    assert p.fits and p.nproc_per_node == 8 and p.master == "10.0.0.1:6767"
    assert [(n.host, n.rank) for n in p.nodes] == [("n1", 0), ("n2", 1), ("n3", 2)]
    n2 = p.node("n2")
    assert n2 is not None
    assert n2.argv[1:] == ("-m", "paddle.distributed.launch", "--master", "10.0.0.1:6767",
                           "--nnodes", "3", "--rank", "1", "--nproc_per_node", "8",
                           "--host", "10.0.0.2", "--devices", "0,1,2,3,4,5,6,7")
    env = dict(n2.env)
    assert env["PADDLE_DEVICES"] == "0,1,2,3,4,5,6,7"
    # The launcher picks its rank ports (and rank 0's store) inside PORT_RANGE: nproc + 1.
    assert env["PORT_RANGE"] == "6070:6078" and env["GLOO_SOCKET_IFNAME"] == "eth0"
    assert env["PADDLE_MASTER"] == "10.0.0.1:6767" and env["PADDLE_RANK"] == "1"
    # What each host is to the job, as findings name it.
    assert p.roles() == {"n1": "worker and master", "n2": "worker", "n3": "worker"}
    assert p.node("n1").ports == (*range(6070, 6079), 6767)
    assert not p.excluded


def test_heterogeneous_gpu_counts_keep_the_largest_alike_set():
    hosts = [node("a", "10.0.0.1", **gpus(8)), node("b", "10.0.0.2", **gpus(4)),
             node("c", "10.0.0.3", **gpus(8)), node("d", "10.0.0.4", **gpus(4)),
             node("e", "10.0.0.5", **gpus(8))]
    c, p = make(hosts)
    assert p.hosts() == ("a", "c", "e") and p.nproc_per_node == 8
    assert p.excluded["b"][0].startswith("4x NVIDIA H100 80GB HBM3 81559 MiB (CC 9.0), driver "
                                         "550.54.15; Paddle 3.3.1 differs from the workers' 8x")
    # Not sized: the inventory is the job, so two hosts short is NO-GO, with the plan shown.
    assert p.lacks == ("5 worker hosts in the inventory, 3 fit",)
    assert judge(c, [], p).verdict is Verdict.NO_GO
    # Sized to what fits: GO, the 4-GPU hosts left out with their reason.
    c, p = make(hosts, nnodes=3)
    assert p.fits and judge(c, [], p).verdict is Verdict.GO
    _, p = make(hosts, nproc_per_node=16)
    assert not p.nodes and p.excluded["a"] == ("has 8 GPUs; the job runs 16 ranks a host",)


def test_equal_groups_go_to_the_one_with_the_first_host():
    _, p = make([node("a", "10.0.0.1", **gpus(4)), node("b", "10.0.0.2", **gpus(8)),
                 node("c", "10.0.0.3", **gpus(8)), node("d", "10.0.0.4", **gpus(4))])
    assert p.hosts() == ("a", "d")


def test_failed_and_blocked_hosts_are_left_out_with_reasons():
    hosts = [node("a", "10.0.0.1"), node("b", "10.0.0.2"),
             node("dead", "10.0.0.3", failure=HostFailure(Stage.CONNECT, "connection refused")),
             node("slow", "10.0.0.4")]
    bad = [Finding("bandwidth", Status.FAIL, ("slow",), "slow: slow host"),
           Finding("env", Status.WARN, ("a",), "a: NCCL_DEBUG=INFO")]
    c, p = make(hosts, findings=bad, nnodes=2)
    assert p.hosts() == ("a", "b") and p.fits
    assert p.excluded == {"dead": ("could not check (connect): connection refused",),
                          "slow": ("bandwidth: slow: slow host",)}
    j = judge(c, bad, p)
    assert j.verdict is Verdict.GO and j.reasons == ()
    # One more node than fits: NO-GO, and the plan says what it lacks.
    c, p = make(hosts, findings=bad, nnodes=3)
    j = judge(c, bad, p)
    assert j.verdict is Verdict.NO_GO and "plan: 3 worker hosts requested, 2 fit" in j.reasons


def test_crashed_check_and_hostless_findings_block_even_a_sized_job():
    c, p = make([node("a", "10.0.0.1"), node("b", "10.0.0.2")], nnodes=2)
    boom = [Finding("gpu", Status.ERROR, (), "check gpu crashed")]
    assert judge(c, boom, p).verdict is Verdict.NO_GO


def test_collective_ports_avoid_what_listens():
    busy = F.PortsFacts((22, 6070, 6073, 6767))
    _, p = make([node("a", "10.0.0.1", ports=busy, **cpu_only()),
                 node("b", "10.0.0.2", **cpu_only())], nproc_per_node=2)
    a = p.node("a")
    assert a is not None and dict(a.env)["PORT_RANGE"] == "6074:6076"
    assert p.master == "10.0.0.1:6768" and dict(p.node("b").env)["PORT_RANGE"] == "6070:6072"
    # Ports from the policy: only those, and a host without enough of them free is left out.
    _, p = make([node("a", "10.0.0.1", ports=busy, **cpu_only()),
                 node("b", "10.0.0.2", **cpu_only())], ports=(6070, 6071, 6767))
    assert p.hosts() == ("b",) and p.master == "10.0.0.2:6767"
    assert p.excluded["a"] == ("no 2 consecutive free ports from the policy ports",)


def test_collective_sized_leaves_spare_hosts_out():
    _, p = make([node(f"n{i}", f"10.0.0.{i}") for i in (1, 2, 3)], nnodes=2)
    assert p.hosts() == ("n1", "n2")
    assert p.excluded == {"n3": ("not needed: the job asks for 2 worker hosts",)}


def test_server_only_role_in_collective_mode():
    _, p = make([node("a", "10.0.0.1"), node("ps", "10.0.0.2", roles=("server",))])
    assert p.hosts() == ("a",) and p.fits  # the inventory's only worker-capable host
    assert p.excluded["ps"] == ("roles: server only (collective jobs have workers only)",)


def test_ipv6_and_unresolved_hosts_are_left_out():
    hosts = [node("a", "10.0.0.1"), node("b", "fd00::2"), node("c", "c.example")]
    c = Cluster(tuple(hosts), Policy(job=JobShape(nnodes=1)))
    p = plan(c, [], {"a": "10.0.0.1", "b": "fd00::2"})
    assert p.excluded["b"][0].startswith("IPv6 address fd00::2")
    assert p.excluded["c"] == ("cannot resolve c.example",)


# ---------------------------------------------------------------- parameter servers
def four_cpu_hosts(**kw: Any) -> list[HostOutcome]:
    return [node(n, f"10.0.0.{i}", **cpu_only(**kw)) for i, n in enumerate("abcd", 1)]


def test_ps_servers_go_to_hosts_without_trainers_spread_one_each():
    _, p = make(four_cpu_hosts(), "ps", server_num=2, trainer_num=2)
    assert [(e.host, str(e)) for e in p.workers] == [("a", "10.0.0.1:6070"),
                                                     ("b", "10.0.0.2:6070")]
    assert [e.host for e in p.servers] == ["c", "d"]
    c_node = p.node("c")
    assert c_node is not None
    assert c_node.argv[3:] == ("--servers", "10.0.0.3:6070,10.0.0.4:6070", "--trainers",
                               "10.0.0.1:6070,10.0.0.2:6070", "--gloo_port", "6767",
                               "--host", "10.0.0.3")
    assert c_node.ports == (6070, 6767)  # gloo's rendezvous runs beside the first server


def test_ps_trainers_leave_the_hosts_that_may_serve_to_the_servers():
    # Only a may serve (the inventory's roles): its trainer goes to an idle host instead, so
    # that the server does not share a with a trainer while c or d stays free.
    outs = [node("a", "10.0.0.1", roles=("worker", "server"), **cpu_only()),
            *(node(n, f"10.0.0.{i}", roles=("worker",), **cpu_only())
              for i, n in ((2, "b"), (3, "c"), (4, "d")))]
    _, p = make(outs, "ps", server_num=1, trainer_num=2)
    assert [e.host for e in p.servers] == ["a"] and [e.host for e in p.workers] == ["b", "c"]
    assert list(p.excluded) == ["d"]
    # Where every host is needed, a server still shares a host with a trainer.
    _, p = make(outs, "ps", server_num=1, trainer_num=4)
    assert [e.host for e in p.servers] == ["a"] and "a" in {e.host for e in p.workers}


def test_ps_servers_prefer_the_best_connected_spare_host():
    runs = (link("c", "a", 1 * G), link("a", "c", 1 * G), link("d", "b", 10 * G),
            link("b", "d", 10 * G))
    net = NetworkTests("ring", ("a", "b", "c", "d"), runs)
    _, p = make(four_cpu_hosts(), "ps", network=net, server_num=1, trainer_num=2)
    assert [e.host for e in p.servers] == ["d"]
    assert p.excluded == {"c": ("not needed: the job's trainers and servers fit elsewhere",)}


def test_ps_servers_share_trainer_hosts_when_headroom_allows():
    _, p = make(four_cpu_hosts(), "ps", server_num=2, trainer_num=4)
    assert [e.host for e in p.servers] == ["a", "b"] and len(p.workers) == 4
    assert p.node("a").ports == (6070, 6071, 6767)
    assert p.fits


def test_ps_not_co_located_when_headroom_is_short():
    # 4 effective cores, load 2: 2 free. A trainer needs 1, a server 1.5: no room for both.
    limits = Limits(ps_server_cores=1.5)
    hosts = four_cpu_hosts(load=2.0, effective=4.0)
    _, p = make(hosts, "ps", limits=limits, server_num=1, trainer_num=3)
    assert [e.host for e in p.servers] == ["d"] and p.fits
    _, p = make(hosts, "ps", limits=limits, server_num=2, trainer_num=3)
    assert [e.host for e in p.servers] == ["d"]
    assert p.lacks == ("server 2 of 2: no host has 1.5 free cores for it (most: a, 1 after its "
                       "trainers and servers)",)


def test_ps_not_enough_headroom_anywhere():
    _, p = make(four_cpu_hosts(load=1.5, effective=2.0), "ps", limits=Limits(cpu_busy_ratio=1),
                server_num=1, trainer_num=2)
    assert not p.servers and not p.fits
    assert p.lacks == ("server 1 of 1: no host has 1 free cores for it (most: c, 0.5 after its "
                       "trainers and servers)",)


def test_ps_needs_of_zero_fit_even_when_the_load_exceeds_the_cores():
    # The simulated cluster's policy: per-process needs off, hosts loaded past their cores.
    limits = Limits(ps_server_cores=0, ps_trainer_cores=0, cpu_busy_ratio=100)
    _, p = make(four_cpu_hosts(load=3.0, effective=2.0)[:2], "ps", limits=limits,
                server_num=1, trainer_num=2)
    assert p.fits and [e.host for e in p.servers] == ["a"] and len(p.workers) == 2


def test_ps_never_stacks_a_server_on_an_overloaded_host():
    hosts = [node("a", "10.0.0.1", **cpu_only()),
             node("hot", "10.0.0.2", **cpu_only(load=14.0)),  # 2 cores free, 88 % busy
             node("c", "10.0.0.3", **cpu_only(load=8.0))]
    _, p = make(hosts, "ps", server_num=2, trainer_num=1)
    assert sorted(e.host for e in p.servers) == ["a", "c"]
    assert "hot: no server here: overloaded (2 cores free of 16)" in p.notes


def test_ps_headroom_is_what_other_work_leaves_in_the_hosts_cgroup_not_the_load_average():
    # hot: another job spins on 14 of its 16 cores inside its cgroup, while its load average
    # still says idle; calm: a container whose machine is loaded (load 30) but whose own
    # cgroup is idle. The headroom follows the cgroup.
    hosts = [node("a", "10.0.0.1", cpu=cpu(busy=0.2)),
             node("hot", "10.0.0.2", cpu=cpu(busy=14.0, loadavg=0.3)),
             node("calm", "10.0.0.3", cpu=cpu(busy=0.5, loadavg=30.0))]
    _, p = make(hosts, "ps", server_num=2, trainer_num=1)
    assert sorted(e.host for e in p.servers) == ["a", "calm"]
    assert "hot: no server here: overloaded (2 cores free of 16)" in p.notes


def test_ps_headroom_is_what_the_jobs_container_may_use():
    # boxed: 16 idle cores on the host, but the job's container runs under --cpus 1 there:
    # the classic throttled parameter server. The plan puts no server in it.
    narrow = F.ContainerFacts(runtime="docker", image="paddle:3.3.1", cgroup=F.ContainerCgroup(
        affinity=16, cpuset="0-15", quota=F.CpuQuota(1, 100000, 100000, 1.0)))
    hosts = [node("a", "10.0.0.1", cpu=cpu(busy=0.2)),
             node("boxed", "10.0.0.2", cpu=cpu(busy=0.2), container=narrow),
             node("c", "10.0.0.3", cpu=cpu(busy=0.5))]
    _, p = make(hosts, "ps", server_num=2, trainer_num=1, limits=Limits(ps_server_cores=1.5))
    assert sorted(e.host for e in p.servers) == ["a", "c"]


def test_ps_odd_trainer_count_spreads_evenly_and_keeps_each_host_contiguous():
    hosts = [node(n, f"10.0.0.{i}", **cpu_only()) for i, n in enumerate("abc", 1)]
    _, p = make(hosts, "ps", server_num=1, trainer_num=5)
    assert [e.host for e in p.workers] == ["a", "a", "b", "b", "c"]
    assert "5 trainers on 3 hosts: up to 2 a host" in p.notes


def test_ps_address_prefix_clash_leaves_one_host_out():
    hosts = [node("h1", "10.0.0.1", **cpu_only()), node("h2", "10.0.0.2", **cpu_only()),
             node("h12", "10.0.0.12", **cpu_only())]
    _, p = make(hosts, "ps", server_num=1, trainer_num=3)
    used = {e.address for e in (*p.servers, *p.workers)}
    assert not any(a != b and b.startswith(a) for a in used for b in used)
    assert p.hosts() == ("h1", "h2") and len(p.workers) == 3
    assert p.excluded["h12"][0].startswith("address 10.0.0.12 and h1's 10.0.0.1: one is a "
                                           "string prefix of the other")


def test_ps_roles_pin_servers_and_workers():
    hosts = [node("ps1", "10.0.0.1", roles=("server",), **cpu_only()),
             node("w1", "10.0.0.2", roles=("worker",), **cpu_only()),
             node("w2", "10.0.0.3", roles=("worker",), **cpu_only())]
    _, p = make(hosts, "ps", server_num=1, trainer_num=2)
    assert [e.host for e in p.servers] == ["ps1"] and [e.host for e in p.workers] == ["w1", "w2"]
    _, p = make(hosts, "ps", server_num=2, trainer_num=2)
    assert [e.host for e in p.servers] == ["ps1", "ps1"]  # spread as far as roles allow


def pinned_servers(h3_roles: tuple[str, ...] = ("worker",)) -> list[HostOutcome]:
    """The inventory pins servers on h1 and h2; h3-h5 train (h3 as h3_roles says)."""
    return [node("h1", "10.0.0.1", roles=("server",), **cpu_only()),
            node("h2", "10.0.0.2", roles=("server",), **cpu_only()),
            node("h3", "10.0.0.3", roles=h3_roles, **cpu_only()),
            *(node(n, f"10.0.0.{i}", roles=("worker",), **cpu_only())
              for i, n in ((4, "h4"), (5, "h5")))]


SLOW_H2 = Finding("bandwidth", Status.FAIL, ("h2",), "h2: slow host: sends at most 95 Mbit/s")


def test_a_pinned_server_left_out_is_no_go_naming_it_not_a_second_server_on_the_other():
    outs = pinned_servers()
    c, p = make(outs, "ps", findings=[SLOW_H2], server_num=2, trainer_num=3)
    assert [e.host for e in p.servers] == ["h1"] and not p.fits
    assert p.lacks == ("server 2 of 2: no other host may serve: h2 (pinned as a server) is "
                       "left out: bandwidth: h2: slow host: sends at most 95 Mbit/s (servers "
                       "share a host only when server_num exceeds the 2 hosts the inventory "
                       "lets serve)",)
    assert judge(c, [SLOW_H2], p).verdict is Verdict.NO_GO


def test_a_spare_host_that_may_serve_takes_a_pinned_servers_place_and_says_so():
    c, p = make(pinned_servers(("worker", "server")), "ps", findings=[SLOW_H2], server_num=2,
                trainer_num=3)
    assert sorted(e.host for e in p.servers) == ["h1", "h3"] and p.fits
    assert "h2, pinned as a server by the inventory, is left out (bandwidth: h2: slow host: " \
        "sends at most 95 Mbit/s): the servers run on h1, h3 instead" in p.notes, p.notes


def test_servers_share_a_host_when_the_job_asks_for_more_than_may_serve_and_say_so():
    outs = [node("ps1", "10.0.0.1", roles=("server",), **cpu_only()),
            *(node(n, f"10.0.0.{i}", roles=("worker",), **cpu_only())
              for i, n in ((2, "w1"), (3, "w2")))]
    _, p = make(outs, "ps", server_num=2, trainer_num=2)
    assert [e.host for e in p.servers] == ["ps1", "ps1"] and p.fits
    assert "ps1 runs 2 servers (server_num 2, 1 host may serve): each gets 8 of its 15.9 " \
        "free cores" in p.notes, p.notes


@pytest.mark.parametrize("shape,explicit", [({}, False), ({"nproc_per_node": 2}, False),
                                            ({"nnodes": 2}, True), ({"server_num": 1}, True)])
def test_only_a_sized_job_is_explicit(shape, explicit):
    assert JobShape(**shape).explicit is explicit


# ---------------------------------------------------------------- what a straggler costs
def test_a_host_left_out_for_a_slow_link_carries_the_all_reduce_cost_of_keeping_it():
    names = [f"n{i}" for i in range(1, 6)]
    outs = [node(n, f"10.0.0.{i}", **cpu_only()) for i, n in enumerate(names, 1)]
    # n5's link runs at a tenth of the others', both ways, confirmed by a retest.
    links = [*survey(names, slow_host("n5", 0.1 * G, 1 * G)),
             link("n5", "n1", 0.1 * G, "retest"), link("n1", "n5", 0.1 * G, "retest")]
    net = NetworkTests("ring", tuple(names), tuple(links))
    c0 = Cluster(tuple(outs), Policy(job=JobShape(nnodes=4)), net)
    _, p = make(outs, network=net, findings=list(bandwidth.check(c0)), nnodes=4)
    assert p.hosts() == ("n1", "n2", "n3", "n4") and list(p.excluded) == ["n5"]
    cost = p.costs["n5"]
    assert cost.nbytes == 32 << 20  # no all-reduce measured: its largest default size
    # 5 ranks at 0.1 Gbit/s vs 4 at 1 Gbit/s: 2*4/5 / (2*3/4) * 10 = 10.7 times as long.
    assert cost.factor == pytest.approx(10 * (8 / 5) / (6 / 4))
    assert cost.without_s == pytest.approx(2 * 3 / 4 * (32 << 20) * 8 / 1e9)
    entry = build.plan_entry(p)
    assert entry is not None
    shown = "\n".join(plan_lines(entry))
    assert "  left out n5: bandwidth: slow host" in shown
    assert "    with it, 32 MiB all-reduce ~4.3 s vs ~0.4 s without (11x, predicted from the " \
        "iperf3 links)" in shown
    assert report_doc(c0, judge(c0, []), p)["plan"]["costs"]["n5"]["factor"] == 10.67
    # Hosts left out for reasons that cost no bandwidth have no figure.
    _, p2 = make(outs[:4] + [node("n5", "10.0.0.5", **cpu_only())], network=NetworkTests(
        "ring", tuple(names), tuple(survey(names, lambda s, r: 1 * G))), nnodes=4)
    assert "n5" in p2.excluded and p2.costs == {}


def test_hostfile_slots_are_the_ranks_of_cpu_hosts_unless_asked():
    hosts = [replace(node(f"n{i}", f"10.0.0.{i}", **cpu_only()),
                     host=Host(name=f"n{i}", address=f"10.0.0.{i}", slots=s))
             for i, s in ((1, 4), (2, 2), (3, 4))]
    _, p = make(hosts)
    assert p.nproc_per_node == 2  # every host runs the same count: the smallest
    assert [n.nproc for n in p.nodes] == [2, 2, 2]
    _, p = make(hosts, nproc_per_node=1)
    assert p.nproc_per_node == 1
    _, p = make([node("a", "10.0.0.1", **cpu_only()), hosts[0]])  # no slots: one rank each
    assert p.nproc_per_node == 1


def test_cuda_visible_devices_decides_the_ranks_of_a_gpu_host():
    # 8 GPUs listed by NVML, the login environment exposing 4: 4 ranks, as the job will see.
    from preflight.judge import run_checks
    from preflight.model import facts as F
    from preflight.placement.planner import plan as make_plan
    env = F.EnvFacts((("CUDA_VISIBLE_DEVICES", "0,1,2,3"),))
    c = cluster(**same(2, gpu=gpu(n=8), env=env))
    p = make_plan(c, run_checks(c), {h: f"10.0.0.{i}" for i, h in enumerate(["node01",
                                                                            "node02"], 1)})
    assert p.nproc_per_node == 4
    # A GPU plan tells NCCL's bootstrap the interface holding each host's address, also in
    # the command `preflight launch` and the report give.
    assert ("NCCL_SOCKET_IFNAME", "eth0") in p.nodes[0].env
    assert p.nodes[0].command().startswith("PORT_RANGE=")
    assert "NCCL_SOCKET_IFNAME=eth0" in p.nodes[0].command()
    odd = F.HostFacts(**{**c.outcomes[0].facts.__dict__, "env": F.EnvFacts(
        (("CUDA_VISIBLE_DEVICES", "GPU-a,,GPU-b"),))})
    assert odd.visible_gpus() == 1  # CUDA stops at the first empty entry
    assert odd.gpu_labels() == ("GPU-a",)
    none = F.HostFacts(**{**c.outcomes[0].facts.__dict__, "env": F.EnvFacts(
        (("CUDA_VISIBLE_DEVICES", "-1"),))})
    assert none.visible_gpus() == 0


def test_the_launcher_is_given_the_gpus_its_ranks_take_as_it_labels_them():
    # Paddle's launcher maps --devices through the entries of CUDA_VISIBLE_DEVICES (its
    # labels), so a host exposing GPUs 4-7 gets --devices 4,5,6,7, and a job of 2 ranks a
    # host the first two of them.
    from preflight.judge import run_checks
    from preflight.model import facts as F
    from preflight.placement.planner import plan as make_plan
    from preflight.placement.sbatch import batch_script
    env = F.EnvFacts((("CUDA_VISIBLE_DEVICES", "4,5,6,7"),))
    c = cluster(**same(2, gpu=gpu(n=8), env=env))
    ips = {"node01": "10.0.0.1", "node02": "10.0.0.2"}
    p = make_plan(c, run_checks(c), ips)
    assert p.nodes[1].argv[-2:] == ("--devices", "4,5,6,7")
    two = replace(c, policy=replace(c.policy, job=JobShape(nproc_per_node=2)))
    p2 = make_plan(two, run_checks(two), ips)
    assert p2.nodes[0].argv[-2:] == ("--devices", "4,5")
    assert ("PADDLE_DEVICES", "4,5") in p2.nodes[0].env
    # A Slurm batch job gets its GPUs from the allocation: no labels of the login shell.
    script = batch_script(p2.nodes, "collective")
    assert "--devices" not in script and "PADDLE_DEVICES" not in script
    # CPU hosts name no devices.
    cpus = cluster(**same(2, gpu=F.GpuFacts(source="none")))
    cpu_plan = make_plan(cpus, run_checks(cpus), ips)
    assert all("--devices" not in n.argv for n in cpu_plan.nodes)


def test_a_slow_host_left_out_of_a_ps_job_costs_a_step_as_a_server():
    names = [f"n{i}" for i in range(1, 6)]
    outs = [node(n, f"10.0.0.{i}", **cpu_only()) for i, n in enumerate(names, 1)]
    links = [*survey(names, slow_host("n5", 0.1 * G, 1 * G)),
             link("n5", "n1", 0.1 * G, "retest"), link("n1", "n5", 0.1 * G, "retest")]
    # The round on the plan: 3 trainers of 10 ms steps, 1000 steps in all; each server's
    # host moved 2 MB in and 1 MB out: 2 kB a step with each server, 6 kB on its link.
    ps = PsRound(("n1", "n2", "n3", "n4"), trainers=tuple(
        PsTrainer(f"n{i}", i, 1000 // 3, 5.0, 0.010) for i in (1, 2, 3)), servers=(
        PsServer("n4", 1, 8.0, 1.0, 0, 0.0, 2_000_000, 1_000_000),),
        seconds=5.0)
    net = NetworkTests("ring", tuple(names), tuple(links), ps=ps)
    c0 = Cluster(tuple(outs), Policy(mode="ps", job=JobShape(server_num=1, trainer_num=3)),
                 net)
    _, p = make(outs, "ps", network=net, findings=list(bandwidth.check(c0)), server_num=1,
                trainer_num=3)
    assert "n5" in p.excluded
    cost = p.costs["n5"]
    assert cost.what == "ps-step" and cost.nbytes == round(2_000_000 / 999)
    # 3 trainers x 2 kB x 8 = 48 kbit a step: 0.48 ms at 0.1 Gbit/s, under the 10 ms step.
    assert cost.with_s == pytest.approx(0.010) and cost.without_s == pytest.approx(0.010)
    # A model that exchanges 100x as much saturates the slow link: 48 ms a step vs 10 ms.
    big = replace(ps, servers=(replace(ps.servers[0], rx_bytes=200_000_000),))
    _, p = make(outs, "ps", network=replace(net, ps=big), findings=list(bandwidth.check(c0)),
                server_num=1, trainer_num=3)
    cost = p.costs["n5"]
    assert cost.with_s == pytest.approx(3 * 8 * 200_000_000 / 999 / 0.1e9)
    entry = build.plan_entry(p)
    assert entry is not None
    shown = "\n".join(plan_lines(entry))
    # The round's model is small: said, with the step size at which n5 doubles a 10 ms step
    # (its 0.1 Gbit/s link carrying 3 trainers' 8 x 81.4 KiB in 20 ms).
    assert "    with a server on it, ~48 ms a step vs ~10 ms without (4.8x, with the PS " \
        "round's own small model, whose steps exchange 196 KiB with a server; a model " \
        "exchanging 81.4 KiB a step with a server would cost 2x; predicted from the PS round " \
        "and the iperf3 links)" in shown, shown
    assert cost.double_at == pytest.approx(2 * 0.010 * 0.1e9 / (8 * 3))
