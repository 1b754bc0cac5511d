"""/dev/shm is large enough: DataLoader workers share batches through it (Docker's default
64 MiB is the classic crash)."""

from __future__ import annotations

from collections.abc import Iterator

from preflight.checks.common import MIB, could_not_check, in_container, job_shm, mib_floor, sections
from preflight.model.cluster import Cluster
from preflight.model.facts import ShmFacts
from preflight.model.findings import Finding

NAME = "shm"
# What docs/checks.md says of it (generated from these): what it judges, why that
# stalls a job, the fix, and the policy limits it reads.
ABOUT = r"""
`/dev/shm` at least 1024 MiB (warn) / 512 MiB (fail): data-loader workers pass batches through
it. Where the job runs in a container, the container's own `/dev/shm`, as its process has
it (with `--ipc host`, the host's).
"""
WHY = ('DataLoader workers pass batches through /dev/shm: too small, they die ("Bus error") and '
       "the rank with them.")
FIX = "`docker run --shm-size 16g` (or `--ipc host`), or remount the tmpfs larger"
LIMITS: tuple[str, ...] = ("shm_warn_mib", "shm_fail_mib")


def check(cluster: Cluster) -> Iterator[Finding]:
    shms, missing = sections(cluster, job_shm, ShmFacts)
    yield from could_not_check(NAME, "/dev/shm", missing)
    lim = cluster.policy.limits
    mib = {host: s.size_bytes // MIB for host, s in shms.items()}
    boxed = {name for name, f in cluster.probed() if in_container(f)}

    def say(host: str, v: int, floor: float) -> str:
        if host in boxed:  # what the container's own process has, read through /proc
            return (f"{host}: /dev/shm in the job's container is {v} MiB (< {floor:g} MiB; "
                    "Docker's default is 64 MB): DataLoader workers share batches through "
                    "it; start it with --shm-size (e.g. 16g) or --ipc host")
        return (f"{host}: /dev/shm is {v} MiB (< {floor:g} MiB): DataLoader workers share "
                "batches through it; enlarge it (docker --shm-size, tmpfs size=)")
    yield from mib_floor(NAME, mib, lim.shm_warn_mib, lim.shm_fail_mib, say,
                         lambda host: {"size_mib": mib[host], "in_container": host in boxed},
                         f"/dev/shm at least {lim.shm_warn_mib} MiB")
