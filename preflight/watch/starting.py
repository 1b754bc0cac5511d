"""A job that is not whole yet: its launchers are still starting its ranks (none yet, or
fewer than the --nproc_per_node a launcher was given), or fewer of its nodes run a launcher
than its launchers say it runs on (--nnodes) while watched hosts run none. Its ranks wait at
the rendezvous for the rest, so there is no pace to judge yet, and the missing nodes are
what to say: not a hang of the ranks that wait, and never a pass (a job started on one node
of three is not running). Said as starting (skip) for as long as a hang may take to be
named (--hang-after), then as a failure on the nodes it waits for."""

from __future__ import annotations

from typing import Optional

from preflight.common.units import hostlist
from preflight.model.findings import Finding, Status
from preflight.model.watch import Blame, WatchFinding, WatchPolicy
from preflight.watch.series import JobSeries, Unit, WatchState, progress

# Units that count steps: log bytes also grow while a rank imports and waits to join.
STEP_UNITS: tuple[Unit, ...] = ("hook", "steps")


def starting(job: JobSeries, state: WatchState, policy: WatchPolicy) -> Optional[Finding]:
    if _stepped(job):
        return None  # it runs: a node missing now is one outside the watched hosts
    have = sorted(job.launcher_hosts())
    unranked = sorted(set(have) - set(job.hosts()))
    short = job.short_launchers()  # some of its ranks seen there, not all of them yet
    n = job.nnodes() or 0
    idle: list[str] = []
    if len(have) < n:
        busy = {h for j in state.jobs.values() for h in j.launcher_hosts()}
        idle = sorted(h for h in state.last_tick if h not in busy)
    if not unranked and not idle and not short:
        return None  # whole, or its other nodes are not among the watched hosts
    latest = [state.hosts[h][-1].t for h in have if state.hosts.get(h)]
    waited = max(latest, default=job.first_t) - job.first_t
    late = waited >= policy.hang_s
    parts = []
    if unranked:
        parts.append(f"its launcher on {hostlist(unranked)} "
                     + (f"started no rank in {waited:.0f} s" if late else
                        "is starting its ranks"))
    if short:
        parts.append("its launcher on " + ", ".join(
            f"{h} {'started only' if late else 'has started'} {k} of its {n_} ranks"
            for h, (k, n_) in sorted(short.items())) + (f" in {waited:.0f} s" if late else ""))
    if idle and late:
        parts.append(f"it waits for {n - len(have)} of its {n} nodes (--nnodes {n}): "
                     f"{hostlist(idle)} started no launcher of it in {waited:.0f} s")
    elif idle:
        parts.append(f"{len(have)} of its {n} nodes run its launcher ({hostlist(have)}), "
                     f"none yet on {hostlist(idle)}")
    ranked = job.hosts()
    if late and ranked:
        parts.append(f"its {len(job.live())} rank(s) on {hostlist(ranked)} wait for them at "
                     "the rendezvous")
    return WatchFinding("starting", Status.FAIL if late else Status.SKIP,
                        tuple(sorted({*unranked, *idle, *short})),
                        f"{job.key} is starting: " + "; ".join(parts),
                        {"nnodes": n or None}, blame=Blame(job=job.key))


def _stepped(job: JobSeries) -> bool:
    """Whether any of its ranks has counted a step since it was first seen."""
    for r in job.live():
        for unit in STEP_UNITS:
            first = r.first.get(unit)
            now = progress(r.latest, unit) if r.samples else None
            if first is not None and now is not None and now > first[1]:
                return True
    return False
