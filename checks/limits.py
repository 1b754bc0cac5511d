"""Host limits that break data loaders and many-rank jobs: /dev/shm size, free space in the
temp directory, open-files limit."""

from __future__ import annotations

from collections.abc import Iterator

from preflight.checks.common import could_not_check, passed, sections, tier
from preflight.facts import LimitsFacts, SectionError, ShmFacts, TmpFacts
from preflight.model import Cluster, Finding

SHM = "shm"
TMP = "tmp"
NOFILE = "nofile"
MIB = 1 << 20


def check_shm(cluster: Cluster) -> Iterator[Finding]:
    shms, missing = sections(cluster, lambda f: f.shm, ShmFacts)
    yield from could_not_check(SHM, "/dev/shm", missing)
    lim = cluster.policy.limits
    ok = []
    for host, s in shms.items():
        mib = s.size_bytes // MIB
        status, floor = tier(mib, lim.shm_warn_mib, lim.shm_fail_mib, high_is_bad=False)
        if status is None:
            ok.append(host)
            continue
        yield Finding(SHM, status, (host,),
                      f"{host}: /dev/shm is {mib} MiB (< {floor:g} MiB): DataLoader workers "
                      "share batches through it; enlarge it (docker --shm-size, tmpfs size=)",
                      {"size_mib": mib})
    if ok:
        yield passed(SHM, ok, f"/dev/shm at least {lim.shm_warn_mib} MiB on {len(ok)} hosts")


def check_tmp(cluster: Cluster) -> Iterator[Finding]:
    tmps, missing = sections(cluster, lambda f: f.tmp or SectionError(
        "not in the probe's output"), TmpFacts)
    yield from could_not_check(TMP, "temp directory", missing)
    lim = cluster.policy.limits
    ok = []
    for host, t in tmps.items():
        mib = t.free_bytes // MIB
        status, floor = tier(mib, lim.tmp_warn_mib, lim.tmp_fail_mib, high_is_bad=False)
        if status is None:
            ok.append(host)
            continue
        yield Finding(TMP, status, (host,),
                      f"{host}: {t.path} has {mib} MiB free (< {floor:g} MiB): Python's "
                      "tempfile, compilers and the launcher write there; free some space",
                      {"path": t.path, "free_mib": mib, "size_mib": t.size_bytes // MIB})
    if ok:
        yield passed(TMP, ok, f"temp directory with {lim.tmp_warn_mib} MiB free or more on "
                     f"{len(ok)} hosts")


def check_nofile(cluster: Cluster) -> Iterator[Finding]:
    limits, missing = sections(cluster, lambda f: f.limits, LimitsFacts)
    yield from could_not_check(NOFILE, "limits", missing)
    lim = cluster.policy.limits
    ok = []
    for host, x in limits.items():
        soft = x.nofile.soft
        status, floor = (None, 0.0) if soft is None else tier(
            soft, lim.nofile_warn, lim.nofile_fail, high_is_bad=False)
        if status is None:
            ok.append(host)
            continue
        yield Finding(NOFILE, status, (host,),
                      f"{host}: open-files limit {soft} (< {floor:g}): "
                      "raise nofile in limits.conf or the service unit", {"soft": soft})
    if ok:
        yield passed(NOFILE, ok, f"open-files limit at least {lim.nofile_warn} on {len(ok)} hosts")
