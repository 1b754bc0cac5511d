"""InfiniBand/RoCE ports: on hosts with RDMA devices, some port is ACTIVE, and the active
ports run at the rate most hosts have (NCCL takes the slowest rail's pace, or falls back to
TCP sockets when no port is up)."""

from __future__ import annotations

from collections.abc import Iterator

from preflight.checks.common import compare, passed, sections
from preflight.model.cluster import Cluster
from preflight.model.facts import NetworkFacts
from preflight.model.findings import Finding, Status

NAME = "ib-ports"
# What docs/checks.md says of it (generated from these): what it judges, why that
# stalls a job, the fix, and the policy limits it reads.
ABOUT = r"""
On hosts with RDMA devices (`/sys/class/infiniband`), some InfiniBand/RoCE port is ACTIVE
(none: fail, NCCL would fall back to TCP sockets; a port down beside active ones: warn, a rail
down), and the active ports' rate is the one most hosts have (slower: fail). Hosts without RDMA
say nothing.
"""
WHY = ("Without an ACTIVE port NCCL falls back to TCP sockets at a fraction of the fabric's "
       "bandwidth; a port at a lower rate makes its host the slow one.")
FIX = "Check cables, the subnet manager (opensm), the switch port; replace the cable or HCA"
LIMITS: tuple[str, ...] = ()
# When it has something to judge (a run without it says so, rather than nothing).
APPLIES = "the hosts have InfiniBand or RoCE devices"


def check(cluster: Cluster) -> Iterator[Finding]:
    nets, _ = sections(cluster, lambda f: f.network, NetworkFacts)  # mtu says what is missing
    rates: dict[str, float] = {}
    counts: dict[str, int] = {}
    for host, net in nets.items():
        if not net.ib_ports:
            continue
        active = net.active_ib_ports()
        down = [p for p in net.ib_ports if p not in active]
        if not active:
            yield Finding(NAME, Status.FAIL, (host,), (
                f"{host}: no InfiniBand/RoCE port is ACTIVE ("
                + ", ".join(f"{p.device}/{p.port} {p.state or '?'}" for p in down)
                + "): NCCL falls back to TCP sockets; check cables, the subnet manager "
                "(opensm) and the switch port"), {"ports": len(down)})
            continue
        if down:
            yield Finding(NAME, Status.WARN, (host,), (
                f"{host}: " + ", ".join(f"{p.device}/{p.port} {p.state or '?'}" for p in down)
                + f" while {len(active)} other port(s) are ACTIVE: a rail down"),
                {"down": [f"{p.device}/{p.port}" for p in down]})
        known = [p.rate_gbps for p in active if p.rate_gbps]
        if known:
            rates[host] = min(known)
        counts[host] = len(active)
    slow = compare(NAME, "InfiniBand rate (Gb/s)", rates)
    yield from slow
    fine = [h for h in counts if h not in {x for f in slow for x in f.hosts}]
    if fine:
        yield passed(NAME, fine, f"InfiniBand/RoCE ports active on {len(fine)} hosts")
