"""The ports the Paddle launcher will use are free on every host.

Ports the policy names must be free (fail). Without them, the plan picks free ports itself,
so Paddle's default ports being taken only warns: a launch by hand with the defaults would
clash, the plan's would not."""

from __future__ import annotations

from collections.abc import Iterator

from preflight.checks.common import could_not_check, passed, sections
from preflight.common.units import port_ranges
from preflight.model.cluster import Cluster
from preflight.model.facts import PortsFacts
from preflight.model.findings import Finding, Status
from preflight.model.policy import DEFAULT_PORTS

NAME = "ports"
# What docs/checks.md says of it (generated from these): what it judges, why that
# stalls a job, the fix, and the policy limits it reads.
ABOUT = r"""
Ports named by `--ports` or the policy are not listening on any host (fail); without them,
Paddle's defaults (6070-6077, 6767) listening warns: a hand-made launch would clash, the plan's
ports are free.
"""
WHY = ("The launcher binds its ports as it starts: one still held by an earlier job keeps that "
       "host's ranks from starting, and the others wait at the rendezvous.")
FIX = "Stop the previous job, or launch with the plan"
LIMITS: tuple[str, ...] = ()


def check(cluster: Cluster) -> Iterator[Finding]:
    explicit = cluster.policy.ports is not None
    wanted = cluster.policy.ports if cluster.policy.ports is not None else DEFAULT_PORTS
    if not wanted:
        return
    listening, missing = sections(cluster, lambda f: f.ports, PortsFacts)
    yield from could_not_check(NAME, "listening ports", missing)
    ok = []
    for host, p in listening.items():
        taken = sorted(set(wanted) & set(p.tcp))
        if taken and explicit:
            yield Finding(NAME, Status.FAIL, (host,),
                          f"{host}: port {port_ranges(tuple(taken))} already in use (the launcher "
                          f"needs {port_ranges(wanted)}): stop the old job or choose other ports",
                          {"taken": taken})
        elif taken:
            yield Finding(NAME, Status.WARN, (host,),
                          f"{host}: port {port_ranges(tuple(taken))} already in use: a launch with "
                          f"Paddle's default ports ({port_ranges(wanted)}) would clash; the plan's "
                          "ports are free", {"taken": taken})
        else:
            ok.append(host)
    if ok:
        yield passed(NAME, ok, f"ports {port_ranges(wanted)} free on {len(ok)} hosts")
