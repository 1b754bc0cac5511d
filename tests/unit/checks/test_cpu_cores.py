"""The cpu-cores check: effective cores, cores left free by other work, and SMT, against the
cluster median."""

from __future__ import annotations

import pytest
from support import cluster, cpu, messages, same

from preflight.checks import cpu_cores
from preflight.model.facts import CpuQuota, SectionError
from preflight.model.findings import Status

QUOTA = CpuQuota(version=1, quota_us=25000, period_us=100000, cores=0.25)


CPU_CASES = [
    ("alike", same(4), [], []),
    ("quota", {**same(3), "node04": {"cpu": cpu(effective=0.25, quota=QUOTA)}},
     ["node04: 0.25 effective cores (cgroup v1 quota 25000/100000 us) vs cluster median 16"], []),
    ("smaller-host-warns", {**same(3), "node04": {"cpu": cpu(effective=12, logical=12)}},
     [], ["node04: 12 effective cores (12 logical cores) vs cluster median 16"]),
    # Another job spinning on 12 of node04's 16 cores in its cgroup: its peers' are free.
    ("taken-by-other-work", {**{f"node0{i}": {"cpu": cpu(busy=0.1)} for i in range(1, 4)},
                             "node04": {"cpu": cpu(busy=12.0, pressure=41.5)}},
     ["node04: cores taken by other work: 12 of 16 busy over the 3 s sample (cgroup v1 "
      "/sys/fs/cgroup/cpuacct/job), 4 free vs cluster median 15.9; CPU pressure 41.5 % "
      "(PSI some avg10)"], []),
    ("a-third-taken-warns", {**{f"node0{i}": {"cpu": cpu(busy=0.1)} for i in range(1, 4)},
                             "node04": {"cpu": cpu(busy=5.0)}},
     [], ["node04: cores taken by other work: 5 of 16 busy over the 3 s sample (cgroup v1 "
          "/sys/fs/cgroup/cpuacct/job), 11 free vs cluster median 15.9"]),
    # The kernel-wide load average is not other work in this host's cgroup: a container on
    # a busy machine, or a shared kernel, passes when its own cgroup is idle.
    ("machine-load-is-not-the-cgroups", {**same(3), "node04": {"cpu": cpu(busy=0.2,
                                                                          loadavg=30.0)}},
     [], []),
    # Everyone equally busy is the cluster's state, not one host's deficit.
    ("all-alike-busy", {f"node0{i}": {"cpu": cpu(busy=8.0)} for i in range(1, 5)}, [], []),
    # SMT off on one host: half the logical CPUs from the same cores is a setting: a warning
    # naming both states, never a 2x core failure.
    ("smt-off-on-one", {**{f"node0{i}": {"cpu": cpu(threads_per_core=2)} for i in range(1, 4)},
                        "node04": {"cpu": cpu(effective=8, logical=8, threads_per_core=1)}},
     [], ["SMT differs: SMT off (1 thread a core) on node04; SMT on (2 threads a core) on "
          "node01, node02, node03: cores are compared as if alike; a job tuned on one setting "
          "runs differently on the other"]),
]


@pytest.mark.parametrize("hosts,fails,warns", [c[1:] for c in CPU_CASES],
                         ids=[c[0] for c in CPU_CASES])
def test_cpu_cores(hosts, fails, warns):
    fs = list(cpu_cores.check(cluster(**hosts)))
    assert messages(fs, Status.FAIL) == fails
    assert messages(fs, Status.WARN) == warns


def test_cpu_section_error():
    fs = list(cpu_cores.check(cluster(a={}, b={"cpu": SectionError("OSError: /proc/stat")})))
    assert messages(fs, Status.COULD_NOT_CHECK) == [
        "b: could not read CPU facts: OSError: /proc/stat"]
