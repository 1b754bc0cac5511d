"""Host limits that break data loaders and many-rank jobs: /dev/shm size, free space in the
temp directory, open-files limit."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from preflight.checks.common import could_not_check, passed, sections, tier
from preflight.facts import LimitsFacts, SectionError, ShmFacts, TmpFacts
from preflight.model import Cluster, Finding

SHM = "shm"
TMP = "tmp"
NOFILE = "nofile"
MIB = 1 << 20


def _mib_floor(check: str, mib: dict[str, int], warn: int, fail: int,
               say: Callable[[str, int, float], str], data: Callable[[str], dict[str, Any]],
               passing: str) -> Iterator[Finding]:
    """A finding per host whose MiB figure is below a floor, and one pass for the rest."""
    ok = []
    for host, value in mib.items():
        status, floor = tier(value, warn, fail, high_is_bad=False)
        if status is None:
            ok.append(host)
        else:
            yield Finding(check, status, (host,), say(host, value, floor), data(host))
    if ok:
        yield passed(check, ok, f"{passing} on {len(ok)} hosts")


def check_shm(cluster: Cluster) -> Iterator[Finding]:
    shms, missing = sections(cluster, lambda f: f.shm, ShmFacts)
    yield from could_not_check(SHM, "/dev/shm", missing)
    lim = cluster.policy.limits
    mib = {host: s.size_bytes // MIB for host, s in shms.items()}
    yield from _mib_floor(
        SHM, mib, lim.shm_warn_mib, lim.shm_fail_mib,
        lambda host, v, floor: f"{host}: /dev/shm is {v} MiB (< {floor:g} MiB): DataLoader "
        "workers share batches through it; enlarge it (docker --shm-size, tmpfs size=)",
        lambda host: {"size_mib": mib[host]}, f"/dev/shm at least {lim.shm_warn_mib} MiB")


def check_tmp(cluster: Cluster) -> Iterator[Finding]:
    tmps, missing = sections(cluster, lambda f: f.tmp or SectionError(
        "not in the probe's output"), TmpFacts)
    yield from could_not_check(TMP, "temp directory", missing)
    lim = cluster.policy.limits
    mib = {host: t.free_bytes // MIB for host, t in tmps.items()}
    yield from _mib_floor(
        TMP, mib, lim.tmp_warn_mib, lim.tmp_fail_mib,
        lambda host, v, floor: f"{host}: {tmps[host].path} has {v} MiB free (< {floor:g} "
        "MiB): Python's tempfile, compilers and the launcher write there; free some space",
        lambda host: {"path": tmps[host].path, "free_mib": mib[host],
                      "size_mib": tmps[host].size_bytes // MIB},
        f"temp directory with {lim.tmp_warn_mib} MiB free or more")


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
