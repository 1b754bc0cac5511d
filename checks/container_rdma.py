"""The job's container is given the RDMA devices where the host has active RDMA ports."""

from __future__ import annotations

from collections.abc import Iterator

from preflight.checks.common import pass_others, read_containers
from preflight.model.cluster import Cluster
from preflight.model.facts import NetworkFacts
from preflight.model.findings import Finding, Status

NAME = "container-rdma"
ABOUT = r"""
Where the host has ACTIVE RDMA ports (InfiniBand or RoCE), the job's container has
`/dev/infiniband` (its `uverbs` nodes, read through its process's own root).
"""
WHY = ("Without the RDMA devices NCCL falls back to TCP sockets: the job runs, many times "
       "slower, and only the all-reduce time says so.")
FIX = "`--device /dev/infiniband` (with `--ulimit memlock=-1`; Kubernetes: the RDMA device plugin)"
LIMITS: tuple[str, ...] = ()
# When it has something to judge (a run without it says so, rather than nothing).
APPLIES = "the job runs in a container on hosts with active RDMA ports"


def check(cluster: Cluster) -> Iterator[Finding]:
    bad: list[Finding] = []
    looked = []
    for host, c, f in read_containers(cluster):
        ports = f.network.active_ib_ports() if isinstance(f.network, NetworkFacts) else []
        if not ports:
            continue  # no RDMA here
        looked.append(host)
        if not any(d.startswith("uverbs") for d in c.infiniband):
            bad.append(Finding(NAME, Status.FAIL, (host,), (
                f"{host}: the host has {len(ports)} active RDMA port(s) "
                f"({ports[0].device}/{ports[0].port}) but the job's container has no "
                "/dev/infiniband/uverbs*: NCCL would fall back to TCP; start it with "
                "--device /dev/infiniband"), {"inside": list(c.infiniband)}))
    yield from bad
    yield from pass_others(NAME, looked, bad,
                           "the job's container has the RDMA devices on {n} hosts")
