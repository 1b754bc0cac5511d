"""The training script and its configs (policy `files`) are the same bytes on every host."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

from preflight.checks.common import compare, could_not_check, pass_others, sections
from preflight.model.cluster import Cluster
from preflight.model.facts import FilesFacts
from preflight.model.findings import Finding, Status

NAME = "files"
# What docs/checks.md says of it (generated from these): what it judges, why that
# stalls a job, the fix, and the policy limits it reads.
ABOUT = r"""
Every `--file` has the same sha256 on every host (a different batch size in one config
desynchronises steps); a missing file fails.
"""
WHY = ("Ranks that run another script or config (another batch size, another model) take "
       "different steps and deadlock at the next collective.")
FIX = "Deploy the job from one source (rsync, a shared image)"
LIMITS: tuple[str, ...] = ()
# When it has something to judge (a run without it says so, rather than nothing).
APPLIES = "files are named (--file, or files: in the policy)"


def check(cluster: Cluster) -> Iterator[Finding]:
    if not cluster.policy.files:
        return
    files, missing = sections(cluster, lambda f: f.files, FilesFacts)
    yield from could_not_check(NAME, "file hashes", missing)
    for path in cluster.policy.files:
        hashes: dict[str, str] = {}
        for host, ff in files.items():
            fact = next((x for x in ff.files if x.path == path), None)
            if fact is None:
                yield Finding(NAME, Status.COULD_NOT_CHECK, (host,),
                              f"{host}: {path} was not hashed", {"path": path})
            elif fact.error or not fact.sha256:
                yield Finding(NAME, Status.FAIL, (host,), f"{host}: {path}: {fact.error}",
                              {"path": path})
            else:
                hashes[host] = fact.sha256
        # Short hashes read well in a table; 12 hex digits are ample to tell files apart.
        short = {h: v[:12] for h, v in hashes.items()}
        diff = compare(NAME, f"{path} sha256", short)
        yield from diff
        if short:
            common = Counter(short.values()).most_common(1)[0][0]
            yield from pass_others(NAME, short, diff, f"{path} identical on {{n}} hosts "
                                   f"(sha256 {common})", path=path)
