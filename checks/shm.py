"""/dev/shm is large enough: DataLoader workers share batches through it (Docker's default
64 MiB is the classic crash)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

from preflight.checks.common import MIB, could_not_check, in_container, job_shm, mib_floor, sections
from preflight.model.cluster import Cluster
from preflight.model.facts import ContainerFacts, HostFacts, ShmFacts
from preflight.model.findings import Finding, Status

NAME = "shm"
# What docs/checks.md says of it (generated from these): what it judges, why that
# stalls a job, the fix, and the policy limits it reads.
ABOUT = r"""
`/dev/shm` at least 1024 MiB (warn) / 512 MiB (fail): data-loader workers pass batches through
it. Where the job runs in a container, the container's own `/dev/shm`, as its process has
it (with `--ipc host`, the host's: there a `shm_size` does not apply and is not passed to the
runtime, and the fix is the host's `/dev/shm`).
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
    facts = dict(cluster.probed())
    boxed = {name for name, f in facts.items() if in_container(f)}
    # A container on the host's IPC has the host's /dev/shm: a shm_size given for it (from
    # the defaults, say) does not apply, and the runtime is not given it.
    ignored = {o.host.name: o.host.container.shm_size for o in cluster.outcomes
               if o.host.container is not None and o.host.container.shm_size
               and not o.host.container.private_ipc}

    def say(host: str, v: int, floor: float) -> str:
        if host in boxed and host_ipc(facts[host]):
            return (f"{host}: /dev/shm is {v} MiB (< {floor:g} MiB) in the job's container, "
                    "which shares the host's IPC (--ipc host) and so the host's /dev/shm: "
                    "DataLoader workers share batches through it; enlarge the host's "
                    "(mount -o remount,size=16g /dev/shm)" + _ignored(host, ignored))
        if host in boxed:  # what the container's own process has, read through /proc
            return (f"{host}: /dev/shm in the job's container is {v} MiB (< {floor:g} MiB; "
                    "Docker's default is 64 MB): DataLoader workers share batches through "
                    "it; start it with --shm-size (e.g. 16g) or --ipc host")
        return (f"{host}: /dev/shm is {v} MiB (< {floor:g} MiB): DataLoader workers share "
                "batches through it; enlarge it (docker --shm-size, tmpfs size=)")
    found = list(mib_floor(NAME, mib, lim.shm_warn_mib, lim.shm_fail_mib, say,
                           lambda host: {"size_mib": mib[host], "in_container": host in boxed,
                                         "host_ipc": host in boxed and host_ipc(facts[host])},
                           f"/dev/shm at least {lim.shm_warn_mib} MiB"))
    for f in found:
        notes = [h for h in f.hosts if h in ignored]
        if f.status is Status.PASS and notes:
            f = replace(f, message=f.message + "; " + "; ".join(
                _ignored(h, ignored).lstrip("; ") for h in notes))
        yield f


def host_ipc(f: HostFacts) -> bool:
    """Whether the job's container shares the host's IPC namespace (and /dev/shm), as its
    process's namespace says (or, where it was not read, inspect)."""
    c = f.container
    if not isinstance(c, ContainerFacts):
        return False
    if c.host_ipc is not None:
        return c.host_ipc
    return c.intent is not None and c.intent.ipc_mode == "host"


def _ignored(host: str, ignored: dict[str, str]) -> str:
    size = ignored.get(host)
    return (f"; {host}: shm_size {size} does not apply on a shared IPC namespace (not "
            "passed to the runtime)") if size else ""
