"""The all-reduce: it ran on every host, and its busbw is what the links predict or the
policy asks for. A busbw that a slow host already explains is not blamed on every host; a
host that kept the others waiting (failed, never joined, stopped) is named alone; a stall
with nobody to blame is one finding for the cluster; a run cut at its deadline while still
progressing is a warning with the sizes that finished; one that ran out of its own time limit
before every rank joined could not check, blaming nobody. Across hosts on an RDMA fabric, NCCL's
own log must show it used the fabric (not TCP sockets), and its busbw is held to the fabric's
rate too, not only to the TCP link on the inventory address (often a management network)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import Optional

from preflight.checks.common import sections
from preflight.common import localise, nccllog
from preflight.common.units import gbytes, hosts_text
from preflight.model.cluster import Cluster
from preflight.model.facts import HostFacts, IbPort, NetworkFacts
from preflight.model.findings import Finding, Status
from preflight.model.measure import NOT_COLLECTIVE, AllReduce, SizeResult

NAME = "allreduce"
# What docs/checks.md says of it (generated from these): what it judges, why that
# stalls a job, the fix, and the policy limits it reads.
ABOUT = r"""
A real all-reduce certifies the hosts the job would use, over the backend the facts call for
(NCCL on GPU hosts: ranks that ran gloo instead, because Paddle saw no GPU, fail, their figures
passing nothing; a one-rank run times the identity a reduction with nobody is, where Paddle's
own `all_reduce` raises): it runs after the iperf3 tests on the hosts the plan keeps on what is
known by then (a host left out for a confirmed slow link, another stack or too few cores is not
a rank; the report lists both, `network.allreduce.hosts` and `network.allreduce_left_out`),
sized to `--allreduce-budget`, with Paddle's launcher (`python -m paddle.distributed.launch
--master --nnodes --rank`) and `paddle.distributed.all_reduce`: NCCL on GPU hosts (one rank per
GPU the job can use: those of `CUDA_VISIBLE_DEVICES` where the host's login environment sets
it, else all NVML lists; the plan's ranks per host follow the same rule, and its env files set
`NCCL_SOCKET_IFNAME` to the interface holding the host's address unless the host sets it), gloo
on CPU hosts. With NCCL and the default sizes, a 256 MiB size is added when the budget allows
(NVLink and multi-rail fabrics show their bandwidth only past ~256 MB). Reports algbw and busbw
(= algbw·2(n-1)/n, nccl-tests' definition) per message size. With NCCL, busbw below 25 % of the
slowest iperf3 link fails (a ring all-reduce cannot beat its slowest link, so something beyond
the links is wrong; the finding quotes what NCCL logged about its transport). The ranks run
with `NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET`, and each host sends back NCCL's choice of
network once (`Using network IB`, `Socket` or a plugin's name; on releases before that line,
`NET/IB : Using ...` or `NET/Socket : Using ...`). Across hosts, NCCL on TCP sockets on a host
with an ACTIVE InfiniBand/RoCE port fails, naming the host (the IB stack missing in the
container, `NCCL_IB_DISABLE`, `NCCL_NET=Socket`). When NCCL did use the fabric and every host
has ACTIVE ports of known rate, busbw is also held to the fabric: below `busbw_link_ratio` (25
%) of the slowest host's RDMA rate (as many of its fastest ACTIVE ports as it has ranks, each
GPU driving its nearest port) fails when the run reached 256 MiB, and warns otherwise (small
messages do not show a fabric's bandwidth). The iperf3 links run on the inventory address,
often a management network; this is the comparison that matters on IB clusters. gloo reduces on
the CPU and is judged only against `busbw_min_gbytes`. A low busbw that a slow host explains is
not blamed on every host: the `bandwidth` finding names the culprit. The benchmark writes each
step (started, at the rendezvous, joined, each collective, each size's result) and a heartbeat
every second as it goes, and preflight reads them while it runs, so a run that does not end by
itself is told apart (`network.allreduce.outcome`): a rank that fails is named with the line of
its log that says why (the others are stopped after a 5 s grace); where something still listens
on the master's port after a 5 s wait, before its launcher starts, the master's host fails
first, naming that process (Paddle's launcher takes whatever answers there for its master,
starts no store, and every launcher waits for peers that never register); a host still behind
the others on the way to the rendezvous when the launch stopped progressing (nothing new for
twice the slowest measured Paddle import, times the Paddle processes that start at once on a
core where hosts share one machine, at least 30 s; each rank's connected sockets count as
progress at the rendezvous) is named as never joined (`never-joined`), with what its log said
last, or where it holds only the launcher's own lines the last of those (how far the launcher
got); a rank past its import of Paddle whose heartbeat stopped for 10 s while the others' go on
is named as stopped (`stalled`) (while importing, loading Paddle's libraries holds the GIL and
its heartbeat may pause on a loaded host: the launch's progress judges it); a run still
completing collectives at its deadline is cut, keeps the sizes that finished and warns (`slow`);
nothing completing and nobody to blame is one finding for the cluster, not a failure of every
host (`stall`); a run that reaches `--allreduce-timeout` while still progressing could not
check, blaming nobody (`out-of-time`). `network.allreduce.progress` says what each host's ranks
did. A host whose SSH connection went after its ranks had finished still passes (its hint says
so; the measurement is whole), and a lost connection is opened again to stop and clean up. A
command that ended with no exit status says why: the signal sshd named (`killed by signal
KILL`), or the SSH connection lost. The launcher's processes are killed on every host; each
host's run directory (`/tmp/.preflight-ar-<run>-<rank>`) is its own, so hosts that share a
`/tmp` do not collide.
"""
WHY = ("It is the job's own collective path end to end (launcher, rendezvous, backend, every "
       "rank): what would stall the job at its first all-reduce stalls here first, with the host"
       " named.")
FIX = ("Fix what the named host's log says (e.g. `GLOO_SOCKET_IFNAME`/`NCCL_SOCKET_IFNAME` "
       "naming a missing interface, a firewall on the ports)")
LIMITS: tuple[str, ...] = ("busbw_min_gbytes", "busbw_link_ratio",
                           "link_fail_ratio", "link_min_gbps")
# When it has something to judge (a run without it says so, rather than nothing).
APPLIES = "the all-reduce runs on two hosts or more (not --no-network-tests or --no-allreduce)"


def sizes_text(sizes: tuple[SizeResult, ...]) -> str:
    return ", ".join(f"{s.nbytes / (1 << 20):g} MiB: busbw {gbytes(s.busbw)} "
                     f"(algbw {gbytes(s.algbw)})" for s in sizes)


def check(cluster: Cluster) -> Iterator[Finding]:
    net = cluster.network
    if net is None:
        return
    for host, why in net.skipped.items():
        if why.startswith("no all-reduce"):
            yield Finding(NAME, Status.COULD_NOT_CHECK, (host,), f"{host}: {why}",
                          {"reason": why})
    ar = net.allreduce
    if ar is None:
        if net.allreduce_skipped and net.allreduce_skipped not in ("turned off",
                                                                   NOT_COLLECTIVE):
            yield Finding(NAME, Status.COULD_NOT_CHECK, net.hosts,
                          f"all-reduce not run: {net.allreduce_skipped}", {})
        return
    if ar.outcome == "slow":
        yield _cut(cluster, ar)
        return
    if ar.outcome == "out-of-time":
        # Its own time limit ended a run that still progressed: not certified, and nothing
        # to blame on a host or the cluster (a large cluster's rendezvous takes minutes).
        yield Finding(NAME, Status.COULD_NOT_CHECK, ar.hosts, f"{ar.backend} all-reduce over "
                      f"{hosts_text(list(ar.hosts))}: {ar.error}",
                      {"backend": ar.backend, "hosts": list(ar.hosts), "error": ar.error,
                       "outcome": ar.outcome, "progress": dict(ar.progress)})
        return
    if ar.error or not ar.sizes:
        yield from _failed(ar)
        return
    if ar.expected and ar.backend != ar.expected:
        # Figures of the wrong path pass nothing: gloo over TCP says nothing of NCCL's.
        yield Finding(NAME, Status.FAIL, ar.hosts, (
            f"the all-reduce over {hosts_text(list(ar.hosts))} ran {ar.backend} where "
            f"{ar.expected} was expected: Paddle on the ranks sees no GPU (a container "
            "started without the GPU's compute capability? CUDA_VISIBLE_DEVICES empty? a "
            "CPU build?)"), {"backend": ar.backend, "expected": ar.expected})
        return
    nets, _ = sections(cluster, lambda f: f.network, NetworkFacts)
    active = {h: n.active_ib_ports() for h, n in nets.items()}
    fell_back = list(_socket_fallbacks(ar, active))
    yield from fell_back
    yield _judged(cluster, ar, None if fell_back else active)


def _socket_fallbacks(ar: AllReduce, active: dict[str, list[IbPort]]) -> Iterator[Finding]:
    """NCCL across hosts that chose TCP sockets on a host with an ACTIVE RDMA port."""
    if ar.backend != "nccl" or len(ar.hosts) < 2:
        return  # within one host NCCL crosses no network
    for host in ar.hosts:
        ports = active.get(host)
        if ports and nccllog.is_socket(nccllog.transport(ar.logs.get(host))):
            names = ", ".join(f"{p.device}/{p.port}" for p in ports)
            yield Finding(NAME, Status.FAIL, (host,), (
                f"{host}: NCCL fell back to TCP sockets (NET/Socket) although {names} "
                f"{'is' if len(ports) == 1 else 'are'} ACTIVE: its collectives crossed TCP, "
                "not the RDMA fabric (NCCL_IB_DISABLE or NCCL_NET=Socket set? no "
                "libibverbs/rdma-core in the training environment, or /dev/infiniband not "
                "in the container?)"), {"transport": nccllog.SOCKET, "ports": names})


def _fabric_bps(cluster: Cluster, ar: AllReduce,
                active: dict[str, list[IbPort]]) -> Optional[float]:
    """The slowest host's RDMA rate in bits/s: each GPU rank drives its nearest port, so a
    host counts as many of its fastest ACTIVE ports as it has ranks. None unless every host
    has ACTIVE ports with a known rate."""
    facts = dict(cluster.probed())
    rates = []
    for host in ar.hosts:
        known = sorted((p.rate_gbps for p in active.get(host, ()) if p.rate_gbps),
                       reverse=True)
        if not known:
            return None
        rates.append(sum(known[:max(1, _ranks(facts.get(host)))]) * 1e9)
    return min(rates) if rates else None


def _ranks(facts: Optional[HostFacts]) -> int:
    return facts.visible_gpus() if facts is not None else 1


def _failed(ar: AllReduce) -> Iterator[Finding]:
    data = {"backend": ar.backend, "hosts": list(ar.hosts), "error": ar.error,
            "outcome": ar.outcome, "progress": dict(ar.progress), "launch_s": ar.launch_s}
    if not ar.failed:
        # Nobody to blame: the cluster's finding (it blocks), not a failure of every host,
        # which would leave the plan empty for what may be one path between two of them.
        yield Finding(NAME, Status.FAIL, (), f"{ar.backend} all-reduce over "
                      f"{hosts_text(list(ar.hosts))} failed: {ar.error or 'no figures'}", data)
        return
    for host, why in ar.failed.items():
        yield Finding(NAME, Status.FAIL, (host,), f"{host}: {ar.backend} all-reduce rank: "
                      f"{why} ({ar.error})", dict(data, log=why))


def _cut(cluster: Cluster, ar: AllReduce) -> Finding:
    """A run cut at its deadline while collectives still completed: slow, not hung. What
    finished is judged like a whole run; the cut itself is a warning."""
    if ar.sizes:
        judged = _judged(cluster, ar)
        status = judged.status if judged.status in (Status.FAIL,) else Status.WARN
        return replace(judged, status=status, message=f"{judged.message}; {ar.cut}",
                       data=dict(judged.data, cut=ar.cut, outcome=ar.outcome))
    culprits = _slow_hosts(cluster)
    explained = (f"; explained by slow {hosts_text(culprits)} (see bandwidth)"
                 if culprits else "")
    return Finding(NAME, Status.WARN, ar.hosts, f"{ar.backend} all-reduce over "
                   f"{hosts_text(list(ar.hosts))}: no size finished: {ar.cut}{explained}",
                   {"backend": ar.backend, "hosts": list(ar.hosts), "cut": ar.cut,
                    "outcome": ar.outcome, "progress": dict(ar.progress)})


def _judged(cluster: Cluster, ar: AllReduce,
            active: Optional[dict[str, list[IbPort]]] = None) -> Finding:
    """active: each host's ACTIVE RDMA ports, to hold NCCL to the fabric's rate too (None:
    not, as where NCCL fell back to TCP)."""
    limits = cluster.policy.limits
    big = max(ar.sizes, key=lambda s: s.nbytes)  # the bandwidth-bound figure
    busbw_bits = big.busbw * 8
    survey = localise.measured(cluster.network.links) if cluster.network else []
    slowest = min((r.bps for r in survey if r.bps is not None), default=None)
    culprits = _slow_hosts(cluster)
    left_out = dict(cluster.network.allreduce_left_out) if cluster.network else {}
    data = {"backend": ar.backend, "ranks": ar.ranks, "busbw_bytes": big.busbw,
            "slowest_link_bps": slowest, "sizes": [
                {"bytes": s.nbytes, "seconds": s.seconds, "algbw": s.algbw, "busbw": s.busbw}
                for s in ar.sizes], "log_hints": dict(ar.logs), "hosts": list(ar.hosts),
            "left_out": left_out, "budget_s": ar.budget_s, "dropped": list(ar.dropped),
            "launch_s": ar.launch_s}
    head = (f"{ar.backend} all-reduce over {ar.ranks} ranks on {hosts_text(list(ar.hosts))}: "
            f"{sizes_text(ar.sizes)}")
    if left_out:
        head += f"; not ranks, left out by the plan: {hosts_text(list(left_out))}"
    if ar.dropped:
        head += f"; within the {ar.budget_s:g} s budget, dropped: {'; '.join(ar.dropped)}"
    explained = (f"; explained by slow {hosts_text(culprits)} (see bandwidth)"
                 if culprits else "")
    # A ring all-reduce cannot beat its slowest link; NCCL far below even that one has
    # another problem (a fallback transport, a wrong interface), slow hosts or not. gloo
    # reduces on the CPU and is bound by it, so it has no such prediction to meet.
    if ar.backend == "nccl" and slowest is not None \
            and busbw_bits < limits.busbw_link_ratio * slowest:
        return Finding(NAME, Status.FAIL, ar.hosts, head + f"; far below the slowest link "
                       f"({slowest / 8e9:.3g} GB/s): something beyond the links is wrong"
                       + _hints(ar), data)
    rdma = _fabric_bps(cluster, ar, active) if active is not None \
        and ar.backend == "nccl" and len(ar.hosts) > 1 else None
    if rdma is not None and busbw_bits < limits.busbw_link_ratio * rdma:
        data["fabric_bps"] = rdma
        # Small messages do not show a fabric's bandwidth: only a run that reached the size
        # large fabrics need is held to it; a shorter one warns.
        large = big.nbytes >= nccllog.LARGE_MIB * (1 << 20)
        return Finding(NAME, Status.FAIL if large else Status.WARN, ar.hosts, head + (
            f"; far below the RDMA fabric ({rdma / 8e9:.3g} GB/s on the slowest host)"
            + ("" if large else f", measured up to {big.nbytes / (1 << 20):g} MiB only")
            + ": NCCL is not using the fabric at its rate (a rail down, GPUDirect RDMA off, "
            "a PCIe or NUMA placement?)") + _hints(ar), data)
    floor = limits.busbw_min_gbytes * 1e9
    if floor and big.busbw < floor and not culprits:
        return Finding(NAME, Status.FAIL, ar.hosts, head + f"; below the policy floor "
                       f"{gbytes(floor)}" + _hints(ar), data)
    if floor and big.busbw < floor:
        return Finding(NAME, Status.PASS, ar.hosts, head + f"; below the floor "
                       f"{gbytes(floor)}" + explained, data)
    return Finding(NAME, Status.PASS, ar.hosts, head + explained, data)


def _hints(ar: AllReduce) -> str:
    if not ar.logs:
        return ""
    host, text = next(iter(ar.logs.items()))
    return f"; {host}'s log: {text[:200]}"


def _slow_hosts(cluster: Cluster) -> list[str]:
    """Returns the hosts the iperf3 survey found slow (the bandwidth check names them)."""
    net = cluster.network
    survey = localise.measured(net.links) if net else []
    limits = cluster.policy.limits
    line = net.line_bps() if net else None
    threshold = localise.suspect_threshold(survey, limits.link_fail_ratio,
                                              limits.link_min_gbps * 1e9, line)
    if threshold is None:
        return []
    return sorted(localise.localise(survey, threshold, line).slow_hosts)
