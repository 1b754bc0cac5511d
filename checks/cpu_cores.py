"""Effective CPU cores (affinity and cgroup quota) not far below the cluster's median."""

from __future__ import annotations

import statistics
from collections.abc import Iterator

from preflight.checks.common import could_not_check, passed, sections
from preflight.model.cluster import Cluster
from preflight.model.facts import CpuFacts
from preflight.model.findings import Finding, Status

NAME = "cpu-cores"
# A synchronous job runs at the pace of its slowest host: half the median's cores means
# the whole job at about half speed wherever the host's CPU work is on the critical path.
FAIL_BELOW = 0.5
WARN_BELOW = 0.8


def _why(cpu: CpuFacts) -> str:
    if cpu.quota is not None and cpu.quota.cores <= cpu.affinity:
        return (f"cgroup v{cpu.quota.version} quota {cpu.quota.quota_us}/"
                f"{cpu.quota.period_us} us")
    if cpu.affinity < cpu.logical:
        return f"CPU affinity {cpu.affinity} of {cpu.logical}"
    return f"{cpu.logical} logical cores"


def check(cluster: Cluster) -> Iterator[Finding]:
    cpus, missing = sections(cluster, lambda f: f.cpu, CpuFacts)
    yield from could_not_check(NAME, "CPU facts", missing)
    if not cpus:
        return
    median = statistics.median(c.effective for c in cpus.values())
    low = []
    for host, c in cpus.items():
        ratio = c.effective / median if median else 1.0
        if ratio < WARN_BELOW:
            status = Status.FAIL if ratio < FAIL_BELOW else Status.WARN
            low.append(host)
            yield Finding(NAME, status, (host,),
                          f"{host}: {c.effective:g} effective cores ({_why(c)}) vs cluster "
                          f"median {median:g}",
                          {"effective": c.effective, "median": median, "ratio": round(ratio, 3),
                           "quota": None if c.quota is None else c.quota.cores})
    fine = [h for h in cpus if h not in low]
    if fine:
        yield passed(NAME, fine, f"effective cores within {WARN_BELOW:.0%} of the median "
                     f"{median:g} on {len(fine)} hosts", median=median)
