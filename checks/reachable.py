"""Every host was reached and probed; otherwise a could-not-check finding with its stage."""

from __future__ import annotations

from collections.abc import Iterator

from preflight.model.cluster import Cluster
from preflight.model.findings import Finding, Status

NAME = "reachable"
# What docs/checks.md says of it (generated from these): what it judges, why that
# stalls a job, the fix, and the policy limits it reads.
ABOUT = r"""
Every host was reached over SSH and probed. Otherwise `could-not-check` with the stage
(`connect`, `host-key`, `auth`, `upload`, `probe`, `parse`, `timeout`, `interrupted`; `slurm`
when Slurm runs no step on the node) and the reason, e.g. `connection refused`, `accepted TCP
but sent no SSH banner`, `host key CHANGED`.
"""
WHY = ("A host preflight cannot reach or probe is one nobody has looked at, and often one the "
       "launcher cannot reach either: every other rank waits for it at the first barrier.")
FIX = "Start sshd / fix the network; verify and update known_hosts; fix the key or user"
LIMITS: tuple[str, ...] = ()


def check(cluster: Cluster) -> Iterator[Finding]:
    ok = [o.host.name for o in cluster.outcomes if o.ok]
    for o in cluster.outcomes:
        if o.failure is not None:
            yield Finding(NAME, Status.COULD_NOT_CHECK, (o.host.name,),
                          f"{o.host.name}: could not check ({o.failure.stage.value}): "
                          f"{o.failure.reason}",
                          {"stage": o.failure.stage.value, "reason": o.failure.reason,
                           "address": o.host.address})
    if ok:
        yield Finding(NAME, Status.PASS, tuple(ok),
                      f"{len(ok)} of {len(cluster.outcomes)} hosts reached and probed")
