"""Ranks the kernel holds: frozen by their cgroup's freezer (docker pause, a job's freeze), or
asleep in state D on storage that does not answer (a filesystem frozen, a network mount
gone quiet, a disk that hangs), while the ranks of the job elsewhere wait for them. Such a
rank neither steps nor spins, so neither the pace nor the CPU rules see it: it looks like
its waiting peers, and the job like a hang or a pace fallen for no reason.

A rank in D whose storage figures grow (/proc/PID/io) is reading or writing files: a
checkpoint, a data loader. That is a phase of the job, not a stall, and this rule leaves it
alone; without those figures a D state cannot be told from a write, and nothing is said."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Optional

from preflight.common.units import hostlist
from preflight.model.findings import Finding, Status
from preflight.model.watch import Blame, RankSample, WatchFinding, WatchPolicy
from preflight.watch.rules.shared import clock_of
from preflight.watch.series import JobSeries, RankSeries, WatchState

STALL_SHARE = 2 / 3  # of the window's samples a stalled rank spends in D
# Storage bytes a rank in D may move over the window and still be stalled: a trickle (a log
# line, a retried page) is no progress; a checkpoint writes megabytes a second.
MOVING_BYTES = 1 << 20


def held_by_kernel(job: JobSeries, live: Sequence[RankSeries], policy: WatchPolicy,
                   state: WatchState) -> list[Finding]:
    """Per host, its ranks frozen or stalled in D through the window; failed where ranks of
    the job elsewhere are held by neither (their host's doing, its storage or its cgroup),
    said of nobody where every rank is (the job paused as a whole, or storage the hosts
    share); a job of one host whose every rank waits on storage waits on that host's."""
    frozen = [r for r in live if _held(r, policy, lambda s: s.frozen)]
    stalled = [r for r in live if r not in frozen and _stalled(r, policy)]
    if not frozen and not stalled:
        return []
    held = {r.rid for r in frozen + stalled}
    free = [r for r in live if r.rid not in held]
    out: list[Finding] = []
    if not free and (frozen or len(job.hosts()) > 1):
        hosts = tuple(job.hosts())
        what = "frozen (their cgroups' freezer)" if not stalled else \
            "waiting on storage (state D, no bytes read or written)" if not frozen else \
            "frozen or waiting on storage"
        return [WatchFinding(
            "stalled", Status.WARN, hosts,
            f"every rank of {job.key} is {what} for {policy.persist_s:g} s: the job paused "
            "as a whole, or storage they share stands still: no one host to blame",
            blame=Blame("none", job=job.key))]
    for host in sorted({r.rid.host for r in frozen + stalled}):
        mine = [r for r in frozen if r.rid.host == host]
        if mine:
            since = min(_frozen_since(r) for r in mine)
            out.append(WatchFinding(
                "stalled", Status.FAIL, (host,),
                f"{_names(mine)} frozen by {'its' if len(mine) == 1 else 'their'} cgroup's "
                f"freezer (a docker pause, a job's freeze) since "
                f"{clock_of(state.at(host, since))}; {_waiting(len(mine), free)}",
                {"since": since}, blame=Blame("frozen", ranks=tuple(r.rid for r in mine))))
        mine = [r for r in stalled if r.rid.host == host]
        if mine:
            since = min(r.state_since[1] for r in mine)  # in D now: since its spell began
            where = sorted({r.latest.wchan for r in mine if r.latest.wchan})
            out.append(WatchFinding(
                "stalled", Status.FAIL, (host,),
                f"{_names(mine)} {'waits' if len(mine) == 1 else 'wait'} on storage on "
                f"{host} since {clock_of(state.at(host, since))}: in state D"
                + (f" ({', '.join(where)})" if where else "")
                + f", no bytes read or written for {policy.persist_s:g} s (a filesystem or "
                f"mount that does not answer); {_waiting(len(mine), free)}",
                {"since": since}, blame=Blame("storage", ranks=tuple(r.rid for r in mine))))
    return out


def _window(r: RankSeries, policy: WatchPolicy) -> list[RankSample]:
    """The rank's samples over the persistence window; [] until it is covered."""
    if not r.samples or r.first_t is None or r.latest.t - r.first_t < policy.persist_s:
        return []
    return [s for s in r.samples if s.t >= r.latest.t - policy.persist_s]


def _held(r: RankSeries, policy: WatchPolicy, test: Callable[[RankSample], bool]) -> bool:
    # The last sample first: it is in every window, and almost every rank fails it (no window
    # built for each of 8,000 ranks every judgement).
    if not r.samples or not test(r.latest):
        return False
    samples = _window(r, policy)
    return len(samples) >= 2 and all(test(s) for s in samples)


def _stalled(r: RankSeries, policy: WatchPolicy) -> bool:
    """In D through most of the window, the last sample too, and its storage figures known
    and standing still."""
    if not r.samples or r.latest.state != "D":  # in D now: the window only then
        return False
    samples = _window(r, policy)
    if len(samples) < 2 or samples[-1].state != "D":
        return False
    if sum(s.state == "D" for s in samples) < STALL_SHARE * len(samples):
        return False
    moved = _moved(samples[0], samples[-1])
    return moved is not None and moved < MOVING_BYTES


def _moved(a: RankSample, b: RankSample) -> Optional[int]:
    if None in (a.io_read, a.io_written, b.io_read, b.io_written):
        return None
    return (b.io_read or 0) - (a.io_read or 0) + (b.io_written or 0) - (a.io_written or 0)


def _frozen_since(r: RankSeries) -> float:
    """When the rank's current frozen spell began, as far as its samples go back."""
    since = r.latest.t
    for s in reversed(r.samples):
        if not s.frozen:
            break
        since = s.t
    return since


def _names(ranks: Sequence[RankSeries]) -> str:
    if len(ranks) == 1:
        return ranks[0].rid.name()
    return f"{ranks[0].rid.host} ranks " + ", ".join(
        str(r.rid.rank) for r in sorted(ranks, key=lambda x: x.rid.rank or 0))


def _waiting(held: int, free: Sequence[RankSeries]) -> str:
    hosts = sorted({r.rid.host for r in free})
    n = len(free)
    return (f"the job's {n} other rank{'s' if n != 1 else ''} on {hostlist(hosts)} "
            f"wait{'s' if n == 1 else ''} for {'it' if held == 1 else 'them'}")
