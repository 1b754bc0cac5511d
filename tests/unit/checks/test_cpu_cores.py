"""The cpu-cores check: effective cores against the cluster median."""

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
