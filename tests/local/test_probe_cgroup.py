"""The probe reads what a process's cgroup and affinity let it use, as a container runtime
sets them (--cpus, --cpuset-cpus, --memory): checked on a real process put in cgroups of its
own on this machine (cgroup v1, as the simulated hosts have it)."""

from __future__ import annotations

import os
import secrets
import subprocess
from collections.abc import Iterator

import pytest

from preflight.hostside.probe_cpu import cpu_list, memory_limit, process_cgroup

V1 = "/sys/fs/cgroup"
ROOT = os.geteuid() == 0 and all(
    os.path.isdir(os.path.join(V1, c)) for c in ("cpu", "memory"))


@pytest.fixture
def limited() -> Iterator[subprocess.Popen[bytes]]:
    """A sleep on one CPU alone (the first this test may use: a test lane's), under a quota of
    half a core and a 256 MiB memory limit."""
    name = f"preflight-test-{secrets.token_hex(3)}"
    made = []
    try:
        for controller, files in (("cpu", {"cpu.cfs_period_us": "100000",
                                           "cpu.cfs_quota_us": "50000"}),
                                  ("memory", {"memory.limit_in_bytes": str(256 << 20)})):
            path = os.path.join(V1, controller, name)
            os.mkdir(path)
            made.append(path)
            for f, v in files.items():
                with open(os.path.join(path, f), "w") as fh:
                    fh.write(v)
        first = min(os.sched_getaffinity(0))
        p = subprocess.Popen(["taskset", "-c", str(first), "sleep", "30"])
        for path in made:
            with open(os.path.join(path, "cgroup.procs"), "w") as fh:
                fh.write(str(p.pid))
        try:
            yield p
        finally:
            p.kill()
            p.wait()
    finally:
        for path in made:
            os.rmdir(path)


@pytest.mark.skipif(not ROOT, reason="needs root and cgroup v1 cpu and memory (CI has both)")
def test_a_process_reads_as_its_cgroup_and_affinity_limit_it(limited):
    got = process_cgroup(limited.pid)
    assert got["affinity"] == 1 and got["cpuset"] == str(min(os.sched_getaffinity(0)))
    assert got["quota"]["cores"] == 0.5 and got["quota"]["version"] == 1
    assert got["memory_limit_bytes"] == 256 << 20
    # This process's own cgroup has neither limit.
    mine = process_cgroup(os.getpid())
    assert mine["quota"] is None or mine["quota"]["cores"] > 0.5
    assert memory_limit() is None or memory_limit() > 256 << 20


def test_cpu_lists_are_written_as_cpuset_writes_them():
    assert cpu_list([0, 1, 2, 5, 7, 8]) == "0-2,5,7-8"
    assert cpu_list([3]) == "3" and cpu_list([]) == ""
