"""A rank named short of CPU stays named while what holds it stays on its host. Between the
spells where it holds its peers back, the job's phases hide it: while rank 0 evaluates or
saves alone, every rank waits for rank 0, the starved one too, and its busy share is its
peers'; as a phase ends, the busy-share rules need a whole window of steps again before
they can name it. Its cgroup's quota is there all the same, and the job does not step at its
early pace: a cause that outlasts the job's phases and lives on the host, which is what
`--act` may act on. It is named on (the same straggler) while its quota throttles it, or
is below the cores its host had at the check, or it waits for a CPU longer per second run
than its peers, and the job is slowed or in a phase; once none of these holds, it is
dropped, and named again only by the rules that named it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Optional

from preflight.model.findings import Finding, Status
from preflight.model.watch import Blame, WatchFinding, WatchPolicy, blame_of
from preflight.watch.medians import Pool
from preflight.watch.rules.shared import (
    THROTTLED_SHARE,
    AtCheck,
    clock_of,
    fallen_pace,
    held_by_host,
    job_slowed,
    rank_halves,
    wait_per_run,
)
from preflight.watch.series import JobSeries, RankSeries, Span, Unit, WatchState

QUOTA_BELOW = 0.9  # of the host's cores at the check: a quota set on it since


def remember_held(job: JobSeries, found: Sequence[Finding], state: WatchState) -> None:
    """Keeps on the job each rank a CPU rule names short of CPU now (a failing straggler),
    with when it was first named."""
    for f in found:
        blame = blame_of(f)
        if f.check != "straggler" or f.status is not Status.FAIL or blame.cause != "cpu":
            continue
        for rid in blame.ranks:
            r = job.ranks.get(rid)
            if r is not None and r.samples:
                job.held.setdefault(rid, state.at(rid.host, r.latest.t))


def still_held(job: JobSeries, live: Sequence[RankSeries], unit: Unit, policy: WatchPolicy,
               at_check: Mapping[str, AtCheck], found: Sequence[Finding]) -> list[Finding]:
    """The ranks named short of CPU before and not now, named on where their host still
    holds them and the job is slowed or in a phase; the others are dropped from job.held."""
    if not job.held:
        return []
    named = {rid for f in found for rid in blame_of(f).ranks if f.check != "phase"}
    # In a phase of its own now: the phase rule found nothing on its host holding it.
    phased = {rid for f in found for rid in blame_of(f).ranks if f.check == "phase"}
    out: list[Finding] = []
    by_rid = {r.rid: r for r in live}
    phase = next((f for f in found if f.check == "phase"), None)
    slowed = job_slowed(live, unit, policy)
    for rid, since in list(job.held.items()):
        if rid in named:
            continue
        if rid not in by_rid and rid in job.ranks and rid not in job.gone:
            continue  # its host's samples are stale (or its CPU untimed): kept, not named
        r = None if rid in phased else by_rid.get(rid)
        h = None if r is None else rank_halves(r, unit, policy)
        cause = None if r is None or h is None or not (slowed or phase) else \
            _holding(r, h, [x for x in live if x.rid.role == rid.role], unit, policy,
                     at_check)
        if cause is None:  # gone, in a phase, no longer held, or the job back at its pace
            del job.held[rid]
            continue
        assert r is not None
        paces = [p for x in live if (p := fallen_pace(x, unit, policy)) is not None]
        now = (f"the job steps at {min(paces):.2f} x its early pace" if slowed and paces
               else "the job is slowed")
        if phase is not None:
            now = (f"{', '.join(phase.hosts)} is in a phase of the job's own, which every "
                   "rank waits for, it too: its busy share cannot tell it now")
        out.append(WatchFinding(
            "straggler", Status.FAIL, (rid.host,),
            f"{rid.name()} is still held by its host: {cause} (named short of CPU at "
            f"{clock_of(since)}); {now}", {"held_since": since},
            blame=Blame("cpu", ranks=(rid,))))
    return out


def _holding(r: RankSeries, h: tuple[Span, Span], group: Sequence[RankSeries], unit: Unit,
             policy: WatchPolicy, at_check: Mapping[str, AtCheck]) -> Optional[str]:
    """What on its host still holds the rank, said; None where nothing does."""
    share = max((x.throttled / x.periods for x in h if x.periods), default=0.0)
    if share >= THROTTLED_SHARE:
        return f"its cgroup's CPU quota throttles it (in {share:.0%} of periods)"
    cores, check = r.latest.quota_cores, at_check.get(r.rid.host, AtCheck()).cores
    if cores is not None and check and cores < QUOTA_BELOW * check:
        return (f"a cgroup quota of {cores:g} cores, set since the check ({check:g} then), "
                "though it hardly ran to be throttled")
    halves = [rank_halves(x, unit, policy) for x in group if x.rid != r.rid]
    for i in (0, 1):
        peers = Pool(w for x in halves if x is not None
                     and (w := wait_per_run(x[i])) is not None).median_without()
        if held_by_host(h[i], peers):
            return (f"it waits for a CPU {h[i].wait_s / h[i].dt:.2f} s a second, longer per "
                    "second run than its peers")
    return None
