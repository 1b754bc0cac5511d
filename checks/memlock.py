"""Locked memory is unlimited where RDMA is used: NCCL registers its buffers with the HCA."""

from __future__ import annotations

from collections.abc import Iterator

from preflight.checks.common import MIB, could_not_check, in_container, job_limits, pass_others
from preflight.model.cluster import Cluster
from preflight.model.facts import LimitsFacts, NetworkFacts
from preflight.model.findings import Finding, Status

NAME = "memlock"
ABOUT = r"""
Where the host has ACTIVE RDMA ports, the job's locked-memory limit (its container's where it
runs in one) is unlimited, or at least `memlock_min_mib` where the policy sets one (0:
unlimited required).
"""
WHY = ("NCCL pins its buffers for RDMA: a small memlock limit (8 MiB in containers by default) "
       "fails the registration, or makes NCCL fall back to TCP.")
FIX = ("`--ulimit memlock=-1` for a container; `* - memlock unlimited` in limits.conf (and "
       "`LimitMEMLOCK=infinity` for a service) on the host")
LIMITS: tuple[str, ...] = ("memlock_min_mib",)
# When it has something to judge (a run without it says so, rather than nothing).
APPLIES = "the hosts have active RDMA ports"


def check(cluster: Cluster) -> Iterator[Finding]:
    need = cluster.policy.limits.memlock_min_mib
    bad: list[Finding] = []
    looked, missing = [], {}
    for host, f in cluster.probed():
        net = f.network
        if not isinstance(net, NetworkFacts) or not net.active_ib_ports():
            continue  # no RDMA here: the limit does not matter
        limits = job_limits(f)
        if not isinstance(limits, LimitsFacts):
            missing[host] = limits.message
            continue
        looked.append(host)
        soft = limits.memlock.soft
        if soft is None or (need and soft >= need * MIB):
            continue
        boxed = in_container(f)
        bad.append(Finding(NAME, Status.FAIL, (host,), (
            f"{host}: locked memory{' in the job' + chr(39) + 's container' if boxed else ''} "
            f"is limited to {soft // 1024} KiB where RDMA is used: NCCL cannot pin its "
            "buffers; " + ("start it with --ulimit memlock=-1" if boxed else
                           "set memlock unlimited in limits.conf")), {"soft": soft}))
    yield from could_not_check(NAME, "the job's limits", missing)
    yield from bad
    yield from pass_others(NAME, looked, bad,
                           "locked memory " + ("unlimited" if not need else f">= {need} MiB")
                           + " where RDMA is used, on {n} hosts")
