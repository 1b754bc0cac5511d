"""Host clocks agree: skew against the cluster's median within the policy's bounds."""

from __future__ import annotations

import statistics
from collections.abc import Iterator

from preflight.checks.common import could_not_check, passed, sections, tier
from preflight.model.cluster import Cluster
from preflight.model.facts import ClockFacts
from preflight.model.findings import Finding, Status

NAME = "clock"
# What docs/checks.md says of it (generated from these): what it judges, why that
# stalls a job, the fix, and the policy limits it reads.
ABOUT = r"""
Each host's clock within 1 s (warn) / 5 s (fail) of the cluster's median, measured against the
controller: each probe stamps its clock between the moment its command was sent and the moment
its answer arrived, so each host's offset is an interval whose width is the command's own
delays (a slow start, a late answer), not the probe's run. A host is blamed only by what even
the near end of its interval shows, never a false clock. Where the interval is too wide to
tell an offset within 1 s (a starved host, a loaded controller, a slow Slurm step) but not 5 s,
it passes judged to the wider bound, with the delay named; wider than 5 s, the host is "could
not check".
"""
WHY = ("Timeouts, certificates and logs read side by side assume one time: skewed clocks make "
       "NCCL and gloo timeouts fire early or late and the hosts' logs disagree on what came "
       "first.")
FIX = "Fix NTP/chrony"
LIMITS: tuple[str, ...] = ("clock_skew_warn_s", "clock_skew_fail_s")


def check(cluster: Cluster) -> Iterator[Finding]:
    clocks, missing = sections(cluster, lambda f: f.clock, ClockFacts)
    yield from could_not_check(NAME, "the clock", missing)
    spans = {h: _span(c) for h, c in clocks.items() if c.skew_s is not None}
    if not spans:
        return
    # Against the median, not the controller: the controller's own clock may be the odd one.
    # The median's own bounds are the medians of the hosts' bounds.
    mid_lo = statistics.median(lo for lo, _ in spans.values())
    mid_hi = statistics.median(hi for _, hi in spans.values())
    median = (mid_lo + mid_hi) / 2
    lim = cluster.policy.limits
    ok = []
    loose: list[Finding] = []  # judged to the fail bound only: said apart
    for host, (lo, hi) in spans.items():
        # At least this far from the median, and at most that far, however the delays fell.
        near = max(0.0, lo - mid_hi, mid_lo - hi)
        far = max(hi - mid_lo, mid_hi - lo)
        status, limit = tier(near, lim.clock_skew_warn_s, lim.clock_skew_fail_s)
        off = (lo + hi) / 2 - median
        if status is not None:
            bound = "at least " if hi - lo + mid_hi - mid_lo > 0.1 else ""
            yield Finding(NAME, status, (host,),
                          f"{host}: clock {bound}{near:.1f} s "
                          f"{'ahead of' if off > 0 else 'behind'} the cluster median (limit "
                          f"{limit:g} s): fix NTP/chrony",
                          {"offset_s": round(off, 3), "at_least_s": round(near, 3),
                           "limit_s": limit})
        elif far > lim.clock_skew_fail_s:
            yield Finding(NAME, Status.COULD_NOT_CHECK, (host,), (
                f"{host}: could not judge its clock: its probe's command was "
                f"{_delay(lo, hi, mid_lo, mid_hi):.1f} s slower to start or answer than its "
                "own run (a starved or loaded host, a slow step), so an offset beyond "
                f"{lim.clock_skew_fail_s:g} s cannot be told from the delay"),
                {"offset_s": round(off, 3), "uncertainty_s": round(far, 3)})
        elif far > lim.clock_skew_warn_s:
            # Within the fail bound however the delays fell: judged to that bound, and said.
            loose.append(Finding(NAME, Status.PASS, (host,), (
                f"{host}: clock within {far:.1f} s of the cluster median, judged to that "
                f"only: its probe's command was {_delay(lo, hi, mid_lo, mid_hi):.1f} s slower "
                "to start or answer than its own run (a loaded host or controller, a slow "
                f"step), too slow to tell an offset within {lim.clock_skew_warn_s:g} s"),
                {"offset_s": round(off, 3), "uncertainty_s": round(far, 3)}))
        else:
            ok.append(host)
    if ok:
        mids = [sum(spans[h]) / 2 for h in ok]
        yield passed(NAME, ok, f"clocks within {max(mids) - min(mids):.2f} s of each other on "
                     f"{len(ok)} hosts")
    yield from loose


def _delay(lo: float, hi: float, mid_lo: float, mid_hi: float) -> float:
    """How much longer than its own run the host's probe took to start and answer."""
    return (hi - lo) + (mid_hi - mid_lo) / 2


def _span(c: ClockFacts) -> tuple[float, float]:
    """The interval the host's offset lies in (a report from before the bounds: a point)."""
    assert c.skew_s is not None
    u = c.uncertainty_s or 0.0
    return c.skew_s - u, c.skew_s + u
