"""/dev/shm is large enough: DataLoader workers share batches through it (Docker's default
64 MiB is the classic crash)."""

from __future__ import annotations

from collections.abc import Iterator

from preflight.checks.common import MIB, could_not_check, mib_floor, sections
from preflight.model.cluster import Cluster
from preflight.model.facts import ShmFacts
from preflight.model.findings import Finding

NAME = "shm"


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
