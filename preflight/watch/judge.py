"""The watch's judgement: functions from what was sampled to findings. Nothing here reads
a host. What a judgement leaves for the next: the host the link rule named (a link's full
queues move from pair to pair between windows) and the host that went quiet as its peers
died (its own ranks' ends come in once it answers again); replay judges at the same beat
as the watch did.

In a synchronous job every rank steps at the pace of the slowest, so progress alone names
nobody: the straggler is the rank that keeps busy (on a CPU, or waiting for one) while its
peers sleep in the collective waiting for it. Where ranks do step at their own pace (PS
trainers in async mode), the straggler is the one slower than its peers' median. Either
way a rank is named only when it holds in both halves of the persistence window, and a
stopped or dead rank at once.

The rules live in watch/rules/, one module per cause family; _job applies them in this order,
each yielding to what came before it:

  1. ends      the job suspended as a whole (every rank stopped together: nobody blamed,
               the rules below do not run); stopped, traced, dead ranks and their causes;
               a whole-job stop
  2. starting  the job's ranks still starting: nothing to pace (watch/starting.py)
  3. kernel    ranks frozen, or in D on storage that does not answer, on one host while
               the others wait: that host; the rules below do not run
  4. hang      no progress anywhere: no pace to compare, the rules below do not run
               (every rank writing files is a save of the job's own: a phase)
  5. cpu       a PS server holding every trainer; then per role, skipping ranks named so
               far: slower trainers (PS), busier ranks (the job's shape said, not blamed;
               with nothing on their host holding them, a phase of the job's own),
               once the job slowed a worker short of CPU where its peers are not (spinning);
               PS servers short of CPU, skipping hosts blamed so far; a PS server busier
               than from its start with nothing holding it as its trainers' queues to it
               fill: a phase of its own (rules/phases.py); a rank named short of CPU
               before stays named while its host still holds it and the job is slowed or
               in a phase, which hides it (rules/held.py)
  6. links     a slow link, skipping pairs with a host blamed so far or in a phase (a
               starved rank drains its sockets slowly, a busy one reads them late: its
               host's doing); the host named stays named while it is an end of every full
               pair; a network-bound job's usually full pairs count only where they stay
               full while the others drain
  7. gpus      slowed GPUs, said on the finding that names their rank, else their own
  8. phases    each phase against the rank's earlier ones: long ones warned (rules/phases.py)
  9. progress  progress that could not be read; the pass line where nothing was blamed, or,
               where the job fell below its early pace with nothing found holding it (and
               no phase), a warning that says what was measured, naming nobody
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Optional

from preflight.common.units import hostlist
from preflight.model.findings import Finding, Status
from preflight.model.watch import RankId, WatchFinding, WatchPolicy, blame_of
from preflight.watch import gpus, timeshare
from preflight.watch.rules import phases
from preflight.watch.rules.cpu import (
    busier_ranks,
    server_holds_trainers,
    slower_trainers,
    starved_ranks,
    starved_servers,
)
from preflight.watch.rules.ends import ending, stopped_or_dead
from preflight.watch.rules.hang import find_hang
from preflight.watch.rules.held import remember_held, still_held
from preflight.watch.rules.kernel import held_by_kernel
from preflight.watch.rules.links import slow_link
from preflight.watch.rules.progress import (
    cpu_untimed,
    pace_line,
    progress_unread,
    slowed_unexplained,
)
from preflight.watch.rules.shared import AtCheck, blamed, clock_of, job_slowed
from preflight.watch.series import JobSeries, RankSeries, Unit, WatchState
from preflight.watch.starting import starting

__all__ = ["STALE_FLOOR_S", "STALE_INTERVALS", "AtCheck", "judge", "stale_after"]

STALE_INTERVALS = 3  # a host with no sample for this many intervals cannot be judged
# ... nor for fewer seconds than this, however short the interval: a loaded host or a busy
# SSH channel delays a line by a second or two, and that is not a stuck sampler.
STALE_FLOOR_S = 5.0


def stale_after(policy: WatchPolicy) -> float:
    """The silence after which a host's samples are stale (its ranks cannot be judged)."""
    return max(STALE_INTERVALS * policy.interval_s, STALE_FLOOR_S)


def judge(state: WatchState, policy: WatchPolicy, now: float,
          at_check: Mapping[str, AtCheck], addresses: Optional[Mapping[str, str]] = None,
          final: bool = True) -> list[Finding]:
    """Returns the findings of the watch so far: per job, its stopped, dead and straggling
    ranks, or its hang; per host, why it cannot be judged; a pass line per healthy job."""
    out: list[Finding] = []
    stale = {h: now - t for h, t in state.last_tick.items()
             if now - t > stale_after(policy)}
    # A host whose samples still come, but taken long before they arrive (a connection that
    # backs up, its clock stepped back): as old as that, they are stale too.
    late = {h: lag for h in state.last_tick if h not in stale
            and (lag := state.lag(h)) > stale_after(policy)}
    for host in sorted(stale) + sorted(late):
        # Its ranks' last figures are stale, not evidence: they leave every rule (no
        # straggler, hang or death is read from them) and are said as not judged.
        ranks = [r.rid.name() for job in state.jobs.values() for r in job.live()
                 if r.rid.host == host]
        why = (f"no sample from {host} for {stale[host]:.0f} s (its sampler or its connection "
               "is stuck)") if host in stale else (
            f"the samples from {host} arrive {late[host]:.0f} s after they were taken, later "
            "than its recent ones did (its connection backs up, or its clock was stepped "
            "back)")
        out.append(Finding("watch", Status.COULD_NOT_CHECK, (host,),
                           why + (f": could not judge {', '.join(ranks)}" if ranks else "")))
    stale = {**stale, **late}
    for job in state.jobs.values():
        found = _job(job, policy, at_check, state, addresses or {}, stale)
        out.extend(_timed(job, found, now, any(h in stale for h in job.hosts()), policy))
    if not state.jobs and state.last_tick:
        # While watching, a job may be yet to start; at the end there was none to watch.
        out.append(Finding("watch", Status.COULD_NOT_CHECK if final else Status.SKIP,
                           tuple(sorted(state.last_tick)),
                           f"no Paddle job runs on {hostlist(sorted(state.last_tick))} "
                           "(no paddle.distributed.launch process there)"
                           + ("" if final else "; waiting for one")))
    return out


def _pressure(state: WatchState) -> dict[str, float]:
    """Each host's CPU pressure at its last sample (PSI's share of the last 10 s some task
    waited for a CPU), where its kernel says it."""
    return {h: d[-1].psi_cpu for h, d in state.hosts.items() if d and d[-1].psi_cpu is not None}


def _job(job: JobSeries, policy: WatchPolicy, at_check: Mapping[str, AtCheck],
         state: WatchState, addresses: Mapping[str, str],
         stale: Mapping[str, float]) -> list[Finding]:
    present = [r for r in job.live() if r.samples and r.rid.host not in stale]
    # The job's hosts gone quiet, with how long: the lost peer its ranks die of may be one.
    quiet = {r.rid.host: stale[r.rid.host] for r in job.live() if r.rid.host in stale}
    if not present and quiet and not job.gone:
        return []  # every rank it has left is on a host gone quiet: nothing to judge
    live = [r for r in present if r.latest.state != "Z"]  # a zombie has exited
    if not job.ranks:  # its launchers are starting its ranks
        return [f for f in [starting(job, state, policy)] if f is not None]
    if not live:  # the job has ended: how its ranks ended is all there is to say
        died = stopped_or_dead(job, present, live, policy, state, quiet, addresses)
        if quiet and not died:
            return []  # its ranks on a host gone quiet may run yet: not ended
        end = max([state.at(rid.host, t) for rid, (t, _) in job.gone.items()] +
                  [state.at(r.rid.host, r.state_since[1]) for r in present
                   if r.latest.state == "Z"], default=0.0)
        return died or [WatchFinding("ended", Status.PASS, tuple(job.hosts()),
                                     f"{len(job.ranks)} ranks of {job.key} ended by "
                                     f"{clock_of(end)}, none of them in error")]
    out = stopped_or_dead(job, present, live, policy, state, quiet, addresses)
    if any(f.check == "suspended" for f in out):
        return out  # the job stands still as a whole, by someone's hand: nothing to pace
    whole = starting(job, state, policy)
    if whole is not None:  # its ranks wait for nodes yet to start: nothing to pace
        return [*out, whole]
    held = held_by_kernel(job, live, policy, state)
    if held:
        # Ranks the kernel holds explain a job that stands still or crawls: no hang is said,
        # and no pace or CPU rule reads them (asleep, they look like their waiting peers).
        return [*out, *held]
    hung = find_hang(job, live, policy, state)
    if hung:  # a hang, or every rank saving with no step
        job.told_at = max(state.at(r.rid.host, r.latest.t) for r in live)
        return out + hung  # no pace to compare while nothing moves
    finishing = ending(job, present, live, out, state)
    if finishing is not None:  # ranks leave one by one: those left are no stragglers
        return [*out, finishing]
    unit = job.unit()
    # The CPU rules read the ranks whose CPU times the kernel keeps; the others are said.
    timed = [r for r in live if r.latest.timed]
    out.extend(server_holds_trainers(timed, unit, policy, at_check))
    named: set[RankId] = {rid for f in out for rid in blame_of(f).ranks}
    for role in ("worker", "trainer", "server"):
        group = [r for r in live if r.rid.role == role and r.rid not in named]
        if len(group) < 2 or not all(_warmed(r, policy) for r in group):
            # Fewer than two to compare, or the job still warming up: its ranks importing
            # and building together share the host's CPUs, and who waits then is no fault.
            continue
        # The ranks of a collective job step together: a pace apart is only where each
        # steps on its own (PS trainers).
        found = [] if role == "worker" else slower_trainers(group, unit, policy, at_check, job)
        group = [r for r in group if r.latest.timed]
        if (role == "worker" or not found) and len(group) >= 2:
            found += busier_ranks(group, unit, policy, at_check, job,
                                  [blame_of(f).ranks[0] for f in found], _pressure(state))
        if role == "worker" and len(group) >= 2:
            found += starved_ranks(group, unit, policy, at_check,
                                   [rid for f in found for rid in blame_of(f).ranks])
        out.extend(found)
    out.extend(starved_servers(timed, unit, policy, at_check, addresses, blamed(out)))
    remember_held(job, out, state)
    out.extend(still_held(job, timed, unit, policy, at_check, out))
    out.extend(phases.serving(timed, unit, policy, addresses, blamed(out)))
    # A pair with a host already named is that host's doing (a starved rank drains its
    # sockets slowly), and so is one with a rank in a phase of its own (busy in its own
    # work, it reads them late): the link is blamed only where nothing else explains it.
    explained = blamed(out) | {f.hosts[0] for f in out if f.check == "phase"
                               and len(f.hosts) == 1}
    out.extend(slow_link(job, live, policy, at_check, state, addresses, explained, unit,
                          quiet))
    out = gpus.findings(live, unit, state, policy, out)
    out = phases.follow(job, out, state, policy)
    out.extend(gpus.unreadable(job.hosts(), live, state))
    out.extend(progress_unread(live))
    out.extend(cpu_untimed(live))
    if job.restarts:  # said, never blamed: the job recovered by itself
        at, ended = job.restarts[-1]
        out.append(WatchFinding(
            "restarted", Status.PASS, tuple(job.hosts()),
            f"{job.key} started its ranks again in place at {clock_of(at)} after {ended} "
            f"of them ended (an elastic restart"
            + (f"; {len(job.restarts)} so far" if len(job.restarts) > 1 else "")
            + "): the ends before it are its earlier attempt's"))
    if all(f.status is Status.PASS for f in out):  # nothing but the job's shape said
        phased = any(f.check == "phase" for f in out)
        slowed = not phased and all(_warmed(r, policy) for r in live) and \
            job_slowed(live, unit, policy)
        now = max(state.at(r.rid.host, r.latest.t) for r in live)
        job.slowed_since = (now if job.slowed_since is None else job.slowed_since) \
            if slowed else None
        if not (phased or slowed or quiet) and all(_warmed(r, policy) for r in live):
            _follow_paces(job, live, unit, policy, now)  # a judgement that said nothing
        # A window more for a cause to be told (a straggler, a link, a phase): a fallen pace
        # is said as unexplained once no rule named one for that long.
        if slowed and job.slowed_since is not None and \
                now - job.slowed_since >= policy.persist_s:
            # No step on any rank through the window, every rank saving or computing: a
            # phase of the job's own told before it is long enough to look like a hang.
            still = phases.quiet_for(live, unit)
            whole = None if still < policy.persist_s else \
                phases.every_rank_writes(job, live, policy, still) or \
                phases.every_rank_computes(job, live, policy, still)
            # Counted from the later of its fall and the last time it was told standing still
            # as a whole: the window after a sharded save still holds the save's no steps.
            since = max(job.slowed_since, job.told_at)
            if whole:
                job.told_at = now
                out = phases.follow(job, out + [whole], state, policy)
                out.append(pace_line(job, live, unit, policy, True))
            elif now - since >= policy.persist_s:
                out.append(slowed_unexplained(job, live, unit, policy,
                                              now - since + policy.persist_s))
            else:
                out.append(pace_line(job, live, unit, policy, phased))
        else:
            out.append(pace_line(job, live, unit, policy, phased))
    else:
        job.slowed_since = None  # something is said of it: counted afresh once it clears
    return out


def _timed(job: JobSeries, found: list[Finding], now: float, quiet: bool,
           policy: WatchPolicy) -> list[Finding]:
    """The job's findings with the time since the last judgement counted by what they say
    (watch/timeshare.py), and its pass line saying what the job's time went to."""
    kind, back = timeshare.kind_of(found, quiet, policy.persist_s)
    job.ledger.add(kind, now, back)
    first = job.ledger.first()
    if first is None:
        return found
    said = timeshare.summary(job.ledger, now, clock_of(first))
    return [replace(f, message=f"{f.message}; its time {said}",
                    data={**f.data, "time_s": {k: round(v, 1) for k, v in
                                               job.ledger.seconds().items()}})
            if said and f.check == "progress" and f.status is Status.PASS else f
            for f in found]


def _follow_paces(job: JobSeries, live: list[RankSeries], unit: Unit, policy: WatchPolicy,
                  now: float) -> None:
    """At a judgement that said nothing of the job: each rank's pace and busy shares over
    the window kept, its early pace and early busy shares moved to the median of those over
    the last ten minutes (watch/baseline.py)."""
    for r in live:
        h = r.halves(unit, policy.persist_s, policy.interval_s)
        if h is None:
            continue
        if r.early is not None and h[0].dt > 0 and h[1].dt > 0:
            # Its first interval (RankSeries.first_step) stays: a rank is taken as busier by
            # design only where it was so from its first steps as well.
            busy = (h[0].busy_s + h[1].busy_s) / (h[0].dt + h[1].dt)
            shape = job.shapes.add(r.rid, now, h, busy)
            if shape is not None:
                r.early = shape
        if unit not in r.early_rate or h[0].progress is None or h[1].progress is None:
            continue  # its first pace not learned yet, or its progress not read
        rate = (h[0].progress + h[1].progress) / (h[0].dt + h[1].dt)
        followed = job.paces.add((r.rid, unit), now, rate)
        if followed is not None:
            r.early_rate[unit] = followed


def _warmed(r: RankSeries, policy: WatchPolicy) -> bool:
    """Whether the rank's whole window lies after its warm-up (its first step, or its warm-up
    given up on: series.RankSeries.warm)."""
    return r.warm is not None and r.latest.t - policy.persist_s >= r.warm
