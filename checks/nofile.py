"""The open-files limit is high enough: the common 1024 default gives "Too many open files"
under load."""

from __future__ import annotations

from collections.abc import Iterator

from preflight.checks.common import could_not_check, passed, sections, tier
from preflight.model.cluster import Cluster
from preflight.model.facts import LimitsFacts
from preflight.model.findings import Finding

NAME = "nofile"
# What docs/checks.md says of it (generated from these): what it judges, why that
# stalls a job, the fix, and the policy limits it reads.
ABOUT = r"""
Open-files soft limit at least 16384 (warn) / 4096 (fail).
"""
WHY = ("Sockets, shared memory and data files count against the open-files limit: at the common "
       '1024 a large job fails with "Too many open files" under load.')
FIX = "Raise `nofile` in limits.conf or the service unit"
LIMITS: tuple[str, ...] = ("nofile_warn", "nofile_fail")


def check(cluster: Cluster) -> Iterator[Finding]:
    limits, missing = sections(cluster, lambda f: f.limits, LimitsFacts)
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
        yield Finding(NAME, status, (host,),
                      f"{host}: open-files limit {soft} (< {floor:g}): "
                      "raise nofile in limits.conf or the service unit", {"soft": soft})
    if ok:
        yield passed(NAME, ok, f"open-files limit at least {lim.nofile_warn} on {len(ok)} hosts")
