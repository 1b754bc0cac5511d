"""Memory the job may use, against the cluster's median host: the host's memory, narrowed by
the cgroup limits above the job (its container's --memory, a Slurm step's --mem)."""

from __future__ import annotations

import statistics
from collections.abc import Iterator
from typing import Optional, Union

from preflight.checks.common import could_not_check, passed
from preflight.model.cluster import Cluster
from preflight.model.facts import ContainerFacts, HostFacts, MemoryFacts, SectionError
from preflight.model.findings import Finding, Status

NAME = "memory"
# What docs/checks.md says of it (generated from these): what it judges, why that
# stalls a job, the fix, and the policy limits it reads.
ABOUT = r"""
The memory the job may use on each host within 80 % of the cluster's median (warn) and not
below 50 % (fail): the host's memory, or less where a cgroup limits it (the job's container's
`--memory`, read from its process's cgroup; a Slurm step's `--mem` above the probe).
"""
WHY = ("Ranks of one job hold the same model and batches: a host allowed half the memory of "
       "its peers is the one the OOM killer stops, and the whole job with it.")
FIX = "Give the job the same memory everywhere (the container's --memory, Slurm's --mem)"
LIMITS: tuple[str, ...] = ()
FAIL_BELOW = 0.5
WARN_BELOW = 0.8
GIB = 1 << 30


def job_memory(f: HostFacts) -> Union[tuple[int, str], SectionError]:
    """(the bytes the job may use, what sets them) on one host."""
    mem = f.memory
    if not isinstance(mem, MemoryFacts):
        return mem
    if mem.total_bytes is None:
        return SectionError("MemTotal missing from /proc/meminfo")
    best: tuple[int, str] = (mem.total_bytes, "the host's memory")
    if mem.cgroup_limit_bytes is not None and mem.cgroup_limit_bytes < best[0]:
        best = (mem.cgroup_limit_bytes, "the cgroup limit where the probe ran")
    c = f.container
    limit: Optional[int] = (c.cgroup.memory_limit_bytes if isinstance(c, ContainerFacts)
                            and c.cgroup is not None else None)
    if limit is not None and limit < best[0]:
        best = (limit, "the job's container's memory limit")
    return best


def check(cluster: Cluster) -> Iterator[Finding]:
    have: dict[str, tuple[int, str]] = {}
    missing: dict[str, str] = {}
    for host, f in cluster.probed():
        got = job_memory(f)
        if isinstance(got, SectionError):
            missing[host] = got.message
        else:
            have[host] = got
    yield from could_not_check(NAME, "memory facts", missing)
    if not have:
        return
    median = statistics.median(b for b, _ in have.values())
    fine = []
    for host, (size, why) in have.items():
        ratio = size / median if median else 1.0
        if ratio >= WARN_BELOW:
            fine.append(host)
            continue
        yield Finding(NAME, Status.FAIL if ratio < FAIL_BELOW else Status.WARN, (host,),
                      f"{host}: the job may use {size / GIB:.3g} GiB ({why}) vs cluster "
                      f"median {median / GIB:.3g} GiB: the rank there runs out of memory "
                      "first", {"bytes": size, "median_bytes": median, "ratio": round(ratio, 3),
                                "set_by": why})
    if fine:
        yield passed(NAME, fine, f"memory for the job within {WARN_BELOW:.0%} of the median "
                     f"{median / GIB:.3g} GiB on {len(fine)} hosts", median_bytes=median)
