"""Free space in the temp directory ($TMPDIR, else /tmp): Python's tempfile, compilers, pip
and the launcher write there."""

from __future__ import annotations

from collections.abc import Iterator

from preflight.checks.common import MIB, could_not_check, mib_floor, sections
from preflight.model.cluster import Cluster
from preflight.model.facts import SectionError, TmpFacts
from preflight.model.findings import Finding

NAME = "tmp"
# What docs/checks.md says of it (generated from these): what it judges, why that
# stalls a job, the fix, and the policy limits it reads.
ABOUT = r"""
The temp directory (`$TMPDIR`, else `/tmp`) has 1024 MiB free (warn) / 64 MiB (fail): Python's
tempfile, compilers and the launcher write there. The probe itself writes nothing there (it
arrives on stdin).
"""
WHY = ("tempfile, compilers, JIT caches and the launcher write to the temp directory: full, they"
       " fail as the job starts.")
FIX = "Free some space"
LIMITS: tuple[str, ...] = ("tmp_warn_mib", "tmp_fail_mib")


def check(cluster: Cluster) -> Iterator[Finding]:
    tmps, missing = sections(cluster, lambda f: f.tmp or SectionError(
        "not in the probe's output"), TmpFacts)
    yield from could_not_check(NAME, "temp directory", missing)
    lim = cluster.policy.limits
    mib = {host: t.free_bytes // MIB for host, t in tmps.items()}
    yield from mib_floor(
        NAME, mib, lim.tmp_warn_mib, lim.tmp_fail_mib,
        lambda host, v, floor: f"{host}: {tmps[host].path} has {v} MiB free (< {floor:g} "
        "MiB): Python's tempfile, compilers and the launcher write there; free some space",
        lambda host: {"path": tmps[host].path, "free_mib": mib[host],
                      "size_mib": tmps[host].size_bytes // MIB},
        f"temp directory with {lim.tmp_warn_mib} MiB free or more")
