"""/dev/shm is large enough: DataLoader workers share batches through it (Docker's default
64 MiB is the classic crash)."""

from __future__ import annotations

from collections.abc import Iterator

from preflight.checks.common import MIB, could_not_check, mib_floor, sections
from preflight.model.cluster import Cluster
from preflight.model.facts import ShmFacts
from preflight.model.findings import Finding

NAME = "shm"
# What docs/checks.md says of it (generated from these): what it judges, why that
# stalls a job, the fix, and the policy limits it reads.
ABOUT = r"""
`/dev/shm` at least 1024 MiB (warn) / 512 MiB (fail): data-loader workers pass batches through
it.
"""
WHY = ('DataLoader workers pass batches through /dev/shm: too small, they die ("Bus error") and '
       "the rank with them.")
FIX = "`docker run --shm-size`, or remount the tmpfs larger"
LIMITS: tuple[str, ...] = ("shm_warn_mib", "shm_fail_mib")


def check(cluster: Cluster) -> Iterator[Finding]:
    shms, missing = sections(cluster, lambda f: f.shm, ShmFacts)
    yield from could_not_check(NAME, "/dev/shm", missing)
    lim = cluster.policy.limits
    mib = {host: s.size_bytes // MIB for host, s in shms.items()}
    yield from mib_floor(
        NAME, mib, lim.shm_warn_mib, lim.shm_fail_mib,
        lambda host, v, floor: f"{host}: /dev/shm is {v} MiB (< {floor:g} MiB): DataLoader "
        "workers share batches through it; enlarge it (docker --shm-size, tmpfs size=)",
        lambda host: {"size_mib": mib[host]}, f"/dev/shm at least {lim.shm_warn_mib} MiB")
