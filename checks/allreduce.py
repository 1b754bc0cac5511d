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
from preflight.model.measure import AllReduce, SizeResult

NAME = "allreduce"


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
        if net.allreduce_skipped and net.allreduce_skipped != "turned off":
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
