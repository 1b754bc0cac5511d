"""CPU where the job will run, against the cluster's median host: effective cores (affinity
and cgroup quota), the cores other work leaves free there over the probe's sample (the
host's cgroup, else its CPUs; never the kernel-wide load average), and SMT alike."""

from __future__ import annotations

import statistics
from collections.abc import Iterator, Mapping
from typing import Optional

from preflight.checks.common import could_not_check, passed, sections
from preflight.common.units import hosts_text
from preflight.model.cluster import Cluster
from preflight.model.facts import CpuFacts
from preflight.model.findings import Finding, Status

NAME = "cpu-cores"
# What docs/checks.md says of it (generated from these): what it judges, why that
# stalls a job, the fix, and the policy limits it reads.
ABOUT = r"""
Effective cores (CPU affinity and the cgroup v1/v2 quota, not just `nproc`; where the job runs
in a container, what its cgroup allows: `--cpus`, `--cpuset-cpus`) are within 80 % of the
cluster's median (warn) and not below 50 % (fail): a synchronous job runs at the slowest host's
pace. The cores that other work leaves free over the CPU sample, counted where the job
will run (the cgroup holding the quota, else the host's CPUs; net of the probe itself; PSI
`some avg10` quoted where the kernel has it), are judged the same way against the median
host's: a host busy with another job is flagged (below 0.25 busy cores is noise). The
kernel-wide load average is not used: in a container it charges one quota with the whole
machine. SMT on some hosts and off on others is one warning naming both sets; cores are then
compared as if alike, not failed for the 2x in logical CPUs.
"""
WHY = ("Data loading, the launcher and gloo run on the CPU: a host under a CPU quota or busy "
       "with another job feeds its GPUs late, and every synchronous step waits for it.")
FIX = "Lift the quota or CPU pinning, stop or move the other work, or leave the host out"
LIMITS: tuple[str, ...] = ()
# A synchronous job runs at the pace of its slowest host: half the median's cores means
# the whole job at about half speed wherever the host's CPU work is on the critical path.
FAIL_BELOW = 0.5
WARN_BELOW = 0.8
# Other work below this many cores is noise (sshd, monitoring agents), whatever the ratio.
TAKEN_FLOOR = 0.25


def _why(cpu: CpuFacts) -> str:
    where = "the job's container: " if cpu.host_effective is not None else ""
    if cpu.quota is not None and cpu.quota.cores <= cpu.affinity:
        return (f"{where}cgroup v{cpu.quota.version} quota {cpu.quota.quota_us}/"
                f"{cpu.quota.period_us} us")
    if cpu.affinity < cpu.logical:
        return f"{where}CPU affinity {cpu.affinity} of {cpu.logical}"
    return f"{cpu.logical} logical cores"


def _smt_text(tpc: int) -> str:
    return f"SMT on ({tpc} threads a core)" if tpc > 1 else "SMT off (1 thread a core)"


def _smt(cpus: Mapping[str, CpuFacts]) -> tuple[int, list[Finding]]:
    """Returns the cluster's usual threads per core and a warning when hosts differ: the
    same cores with SMT off show half the logical CPUs, which is a setting, not a defect."""
    by: dict[int, list[str]] = {}
    for host, c in cpus.items():
        if c.threads_per_core:
            by.setdefault(c.threads_per_core, []).append(host)
    if not by:
        return 1, []
    usual = max(by, key=lambda t: (len(by[t]), t))
    if len(by) == 1:
        return usual, []
    odd = [h for t, hs in by.items() if t != usual for h in hs]
    states = "; ".join(f"{_smt_text(t)} on {hosts_text(hs)}" for t, hs in sorted(by.items()))
    return usual, [Finding(NAME, Status.WARN, tuple(odd), f"SMT differs: {states}: cores are "
                           "compared as if alike; a job tuned on one setting runs differently "
                           "on the other", {"threads_per_core": {h: t for t, hs in by.items()
                                                                 for h in hs}})]


def check(cluster: Cluster) -> Iterator[Finding]:
    cpus, missing = sections(cluster, lambda f: f.job_cpu(), CpuFacts)
    yield from could_not_check(NAME, "CPU facts", missing)
    if not cpus:
        return
    usual, smt = _smt(cpus)
    yield from smt

    def cores(c: CpuFacts) -> float:
        # Scaled to the usual SMT setting: SMT alone is the warning above, not a core deficit.
        return c.effective * usual / (c.threads_per_core or usual)

    median = statistics.median(cores(c) for c in cpus.values())
    sampled = {h: c for h, c in cpus.items() if c.other_work is not None}
    median_free = statistics.median(c.free_cores for c in sampled.values()) if sampled else 0.0
    low = []
    for host, c in cpus.items():
        ratio = cores(c) / median if median else 1.0
        if ratio < WARN_BELOW:
            low.append(host)
            yield Finding(NAME, Status.FAIL if ratio < FAIL_BELOW else Status.WARN, (host,),
                          f"{host}: {c.effective:g} effective cores ({_why(c)}) vs cluster "
                          f"median {median:g}",
                          {"effective": c.effective, "median": median, "ratio": round(ratio, 3),
                           "quota": None if c.quota is None else c.quota.cores})
            continue
        busy = _taken(host, c, median_free)
        if busy is not None:
            low.append(host)
            yield busy
    fine = [h for h in cpus if h not in low]
    if fine:
        yield passed(NAME, fine, f"effective cores within {WARN_BELOW:.0%} of the median "
                     f"{median:g} on {len(fine)} hosts" + (
                         f", {median_free:g} free of other work (median)" if sampled else ""),
                     median=median, median_free=median_free if sampled else None)


def short_of_cpu(cluster: Cluster) -> dict[str, str]:
    """{host: why} for the hosts this check finds short of CPU (too few effective cores, or
    cores taken by other work): there iperf3, gloo and the data loaders are CPU-bound, which
    explains slow links better than a NIC does."""
    return {h: f.message.split(": ", 1)[1] for f in check(cluster)
            if f.status in (Status.WARN, Status.FAIL) and len(f.hosts) == 1
            and ("effective" in f.data or "busy_cores" in f.data) for h in f.hosts}


def _taken(host: str, c: CpuFacts, median_free: float) -> Optional[Finding]:
    """A host whose cores other work takes (another job, a runaway process) while its peers'
    are free: the job would wait on it as on a host with fewer cores."""
    work = c.other_work
    if work is None or not median_free or work.busy_cores < TAKEN_FLOOR:
        return None
    ratio = c.free_cores / median_free
    if ratio >= WARN_BELOW:
        return None
    psi = f"; CPU pressure {c.pressure_avg10:g} % (PSI some avg10)" if (
        c.pressure_avg10 is not None) else ""
    return Finding(NAME, Status.FAIL if ratio < FAIL_BELOW else Status.WARN, (host,),
                   f"{host}: cores taken by other work: {work.busy_cores:g} of "
                   f"{c.effective:g} busy over the {work.window_s:g} s sample "
                   f"({work.scope}), {c.free_cores:g} free vs cluster median "
                   f"{median_free:g}{psi}",
                   {"busy_cores": work.busy_cores, "free_cores": c.free_cores,
                    "median_free": median_free, "ratio": round(ratio, 3), "scope": work.scope,
                    "pressure_avg10": c.pressure_avg10})
