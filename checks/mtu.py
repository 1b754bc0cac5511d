"""The interfaces the job will use (the one holding each host's address) share one MTU."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

from preflight.checks.common import compare, job_interfaces, pass_others
from preflight.model.cluster import Cluster
from preflight.model.findings import Finding, Status

NAME = "mtu"
# What docs/checks.md says of it (generated from these): what it judges, why that
# stalls a job, the fix, and the policy limits it reads.
ABOUT = r"""
The interface that holds each host's inventory address (else the default route's) has the same
MTU everywhere: a mismatch hangs NCCL and stalls TCP collectives.
"""
WHY = ("Frames larger than the smaller MTU are dropped on the way: NCCL hangs, and TCP "
       "collectives stall once messages pass the smaller size.")
FIX = "Set one MTU on the job's network"
LIMITS: tuple[str, ...] = ()


def check(cluster: Cluster) -> Iterator[Finding]:
    ifaces, unread = job_interfaces(NAME, cluster)
    yield from unread
    addresses = {o.host.name: o.host.address for o in cluster.outcomes}
    mtus: dict[str, int] = {}
    used: dict[str, str] = {}
    for host, iface in ifaces.items():
        if iface is None or iface.mtu is None:
            yield Finding(NAME, Status.COULD_NOT_CHECK, (host,),
                          f"{host}: no interface holds {addresses[host]} and there is no "
                          "default route: cannot tell which MTU the job uses", {})
            continue
        mtus[host] = iface.mtu
        used[host] = iface.name
    # A mismatched MTU hangs NCCL and stalls TCP collectives once messages exceed the smaller.
    diff = compare(NAME, "MTU", mtus)
    for f in diff:
        yield Finding(f.check, f.status, f.hosts, f.message + " on " + ", ".join(
            f"{h}:{used[h]}" for h in f.hosts), f.data)
    majority = Counter(mtus.values()).most_common(1)
    if majority:
        yield from pass_others(NAME, mtus, diff, f"MTU {majority[0][0]} on the job's interface "
                               "of {n} hosts", interfaces=used)
