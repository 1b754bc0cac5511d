"""Host clocks agree: skew against the cluster's median within the policy's bounds."""

from __future__ import annotations

import statistics
from collections.abc import Iterator

from preflight.checks.common import could_not_check, passed, sections, tier
from preflight.model.cluster import Cluster
from preflight.model.facts import ClockFacts
from preflight.model.findings import Finding

NAME = "clock"
# What docs/checks.md says of it (generated from these): what it judges, why that
# stalls a job, the fix, and the policy limits it reads.
ABOUT = r"""
Each host's clock within 1 s (warn) / 5 s (fail) of the cluster's median, measured against the
controller as each probe's output arrives.
"""
WHY = ("Timeouts, certificates and logs read side by side assume one time: skewed clocks make "
       "NCCL and gloo timeouts fire early or late and the hosts' logs disagree on what came "
       "first.")
FIX = "Fix NTP/chrony"
LIMITS: tuple[str, ...] = ("clock_skew_warn_s", "clock_skew_fail_s")


def check(cluster: Cluster) -> Iterator[Finding]:
    clocks, missing = sections(cluster, lambda f: f.clock, ClockFacts)
    yield from could_not_check(NAME, "the clock", missing)
    skews = {h: c.skew_s for h, c in clocks.items() if c.skew_s is not None}
    if not skews:
        return
    # Against the median, not the controller: the controller's own clock may be the odd one.
    median = statistics.median(skews.values())
    lim = cluster.policy.limits
    ok = []
    for host, skew in skews.items():
        off = skew - median
        status, limit = tier(abs(off), lim.clock_skew_warn_s, lim.clock_skew_fail_s)
        if status is None:
            ok.append(host)
            continue
        yield Finding(NAME, status, (host,),
                      f"{host}: clock {abs(off):.1f} s {'ahead of' if off > 0 else 'behind'} "
                      f"the cluster median (limit {limit:g} s): fix NTP/chrony",
                      {"offset_s": round(off, 3), "limit_s": limit})
    if ok:
        spread = max(skews[h] for h in ok) - min(skews[h] for h in ok)
        yield passed(NAME, ok, f"clocks within {spread:.2f} s of each other on {len(ok)} hosts")
