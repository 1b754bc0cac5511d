"""The open-files limit is high enough: the common 1024 default gives "Too many open files"
under load."""

from __future__ import annotations

from collections.abc import Iterator

from preflight.checks.common import (
    could_not_check,
    in_container,
    job_limits,
    passed,
    sections,
    tier,
)
from preflight.model.cluster import Cluster
from preflight.model.facts import LimitsFacts
from preflight.model.findings import Finding

NAME = "nofile"
# What docs/checks.md says of it (generated from these): what it judges, why that
# stalls a job, the fix, and the policy limits it reads.
ABOUT = r"""
Open-files soft limit at least 16384 (warn) / 4096 (fail); in the job's container where it
runs in one.
"""
WHY = ("Sockets, shared memory and data files count against the open-files limit: at the common "
       '1024 a large job fails with "Too many open files" under load.')
FIX = "Raise `nofile` in limits.conf or the service unit (`--ulimit nofile=` for a container)"
LIMITS: tuple[str, ...] = ("nofile_warn", "nofile_fail")


def check(cluster: Cluster) -> Iterator[Finding]:
    limits, missing = sections(cluster, job_limits, LimitsFacts)
    boxed = {name for name, f in cluster.probed() if in_container(f)}
    yield from could_not_check(NAME, "limits", missing)
    lim = cluster.policy.limits
    ok = []
    for host, x in limits.items():
        soft = x.nofile.soft
        status, floor = (None, 0.0) if soft is None else tier(
            soft, lim.nofile_warn, lim.nofile_fail, high_is_bad=False)
        if status is None:
            ok.append(host)
            continue
        fix = ("start the container with --ulimit nofile=65536:65536" if host in boxed
               else "raise nofile in limits.conf or the service unit")
        where = " in the job's container" if host in boxed else ""
        yield Finding(NAME, status, (host,),
                      f"{host}: open-files limit{where} {soft} (< {floor:g}): {fix}",
                      {"soft": soft, "in_container": host in boxed})
    if ok:
        yield passed(NAME, ok, f"open-files limit at least {lim.nofile_warn} on {len(ok)} hosts")
