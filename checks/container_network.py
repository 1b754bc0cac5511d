"""The job's container shares the host's network: NCCL and gloo ranks on other hosts must
reach its ranks at the host's address."""

from __future__ import annotations

from collections.abc import Iterator

from preflight.checks.common import pass_others, read_containers
from preflight.model.cluster import Cluster
from preflight.model.findings import Finding, Status

NAME = "container-network"
ABOUT = r"""
The job's container runs in the host's network namespace (read through `/proc/<pid>/ns/net`
of its process, not from what inspect says).
"""
WHY = ("On a bridge (or no) network the ranks bind addresses the other hosts cannot reach: "
       "the launcher waits on its master, NCCL or gloo on their peers, until the timeout.")
FIX = "`--network host` (Kubernetes: `hostNetwork: true`)"
LIMITS: tuple[str, ...] = ()
# When it has something to judge (a run without it says so, rather than nothing).
APPLIES = "the job runs in a container"


def check(cluster: Cluster) -> Iterator[Finding]:
    boxes = read_containers(cluster)
    bad = []
    for host, c, _ in boxes:
        if c.host_network is False:
            mode = c.intent.network_mode if c.intent is not None else None
            bad.append(Finding(NAME, Status.FAIL, (host,), (
                f"{host}: the job's container is not on the host's network"
                + (f" (network {mode})" if mode else "") + ": ranks on other hosts cannot "
                "reach it; start it with --network host"), {"network_mode": mode}))
    yield from bad
    yield from pass_others(NAME, [h for h, _, _ in boxes], bad,
                           "the job's container is on the host's network on {n} hosts")
