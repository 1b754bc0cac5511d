"""A hang: no progress on any rank for --hang-after and for 5 times the longest quiet
spell the job had, with what the ranks do now and their stacks."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from preflight.common.units import hostlist
from preflight.model.findings import Finding, Status
from preflight.model.watch import Blame, RankId, WatchFinding, WatchPolicy
from preflight.watch import gpus
from preflight.watch.rules.ends import STOPPED, TRACED
from preflight.watch.rules.phases import (
    busy_alone,
    every_rank_computes,
    every_rank_writes,
    quiet_for,
)
from preflight.watch.series import (
    UNIT_WORDS,
    JobSeries,
    RankSeries,
    WatchState,
)


def find_hang(job: JobSeries, live: Sequence[RankSeries], policy: WatchPolicy,
              state: WatchState) -> list[Finding]:
    """No progress on any rank for hang_s, and for 5 times the longest quiet spell the job
    had before (a job that logs once a minute is not hung after 30 quiet seconds)."""
    unit = job.unit()
    grown = [r for r in live if unit in r.last_growth]
    if not grown or not any(unit in r.longest_quiet for r in live):
        return []  # never seen moving: no pace to miss
    quiet = quiet_for(live, unit)
    before = max(r.longest_quiet.get(unit, 0.0) for r in live)
    if quiet < max(policy.hang_s, 5 * before):
        return []
    phase = every_rank_writes(job, live, policy, quiet) or \
        every_rank_computes(job, live, policy, quiet)
    if phase is not None:
        return [phase]
    if busy_alone(live, policy, quiet):
        return []  # a rank's phase while the others wait: said by the CPU rules
    stopped = [r for r in live if r.latest.state in STOPPED]
    waits = _states(live)
    traced = [r for r in live if r.latest.state == TRACED]
    if stopped:
        cause = f"; {', '.join(r.rid.name() for r in stopped)} is stopped: it holds the rest"
        hosts = tuple(sorted({r.rid.host for r in stopped}))
    elif traced:  # a tracer holds it: said, but no rank of it is the hang's to act on
        cause = (f"; {', '.join(r.rid.name() for r in traced)} is held by a tracer (a "
                 "debugger, strace, py-spy): it holds the rest")
        hosts = tuple(job.hosts())
    else:
        cause = ""
        hosts = tuple(job.hosts())
    return [WatchFinding("hang", Status.FAIL, hosts,
                         f"no progress on any of {len(live)} ranks for {quiet:.0f} s (its "
                         f"longest quiet spell before: {before:.1f} s; counted in "
                         f"{UNIT_WORDS[unit]}){cause}; ranks now: {waits}"
                         f"{gpus.in_hang(live, state)}{_stacks(live, state.stacks)}",
                         {"quiet_s": quiet},
                         blame=Blame("hang", ranks=tuple(r.rid for r in stopped),
                                     job=job.key))]


def _stacks(ranks: Sequence[RankSeries], stacks: Mapping[RankId, str]) -> str:
    """"; stacks: 2 in all_reduce (paddle/...:85) (node[01-02]); 1 in read (...) (node03)"
    from the ranks' innermost frames; where py-spy was missing, say so."""
    got = {r.rid: stacks[r.rid] for r in ranks if r.rid in stacks}
    if not got:
        return ""
    groups: dict[str, list[str]] = {}
    for rid, frame in got.items():
        groups.setdefault(frame, []).append(rid.host)
    parts = [f"{len(h)} {'' if f.startswith('no stack') else 'in '}{f} ({hostlist(h)})"
             for f, h in sorted(groups.items(), key=lambda x: -len(x[1]))]
    return "; stacks: " + "; ".join(parts)


def _states(ranks: Sequence[RankSeries]) -> str:
    """"3 asleep in futex_do_wait, 1 stopped": the ranks grouped by what they do."""
    groups: dict[str, list[str]] = {}
    for r in ranks:
        s = r.latest
        what = "stopped" if s.state in STOPPED else "traced" if s.state == TRACED \
            else "running" if s.state == "R" else \
            f"in I/O ({s.wchan or '?'})" if s.state == "D" else f"asleep in {s.wchan}" \
            if s.wchan else "asleep"
        groups.setdefault(what, []).append(r.rid.host)
    return "; ".join(f"{len(h)} {w} ({hostlist(h)})" for w, h in
                     sorted(groups.items(), key=lambda x: -len(x[1])))
