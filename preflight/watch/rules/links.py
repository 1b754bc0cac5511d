"""A slow link: once the job's pace fell against its own early pace, the host in every
pair whose sender's send queue stayed full. A host so named stays the cause while it is an
end of every full pair: which of its pairs are full changes from one window to the next,
and one pair alone does not tell its two ends apart.

A job network-bound at its own pace (a data-parallel all-reduce keeps every queue of its ring
full) keeps them full in most samples when it slows together (a longer step, an evaluation):
there, a full pair is news only where it was not usually full while the job kept its pace, or
where it stays as full as it was then, over twice the window, while the job's other usually
full pairs drain (a slow link holds its own queue full, and the job it slows sends less on the
others)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Optional

from preflight.model.findings import Finding, Status
from preflight.model.watch import Blame, WatchFinding, WatchPolicy
from preflight.watch.medians import median
from preflight.watch.rules.shared import (
    FULL_SHARE,
    AtCheck,
    clock_of,
    fallen_pace,
    full_pairs,
    job_slowed,
    pair_shares,
)
from preflight.watch.series import (
    JobSeries,
    RankSeries,
    Unit,
    WatchState,
)

# Bytes queued in a host's qdisc at a sample that count toward a standing queue: a shaper
# or a NIC holding back what the host sends (a healthy host's is empty at nearly every
# sample, at 1 Gbit/s and a job's traffic on the rig; a 10 Mbit/s shaper's held 13-109 KiB).
BACKLOG_MIN = 4 << 10
# ... in this share of the samples: a queue that stands (a sample between two bursts finds
# even a shaper's queue empty at times: 1 in 5 to 1 in 19 on the rig).
STANDING_SHARE = 0.5
# Windows judged at the job's pace before its usually full pairs are known.
PACED_MIN = 6
# The job's other usually full pairs have drained when their share of full samples now is at
# most this of what it was at the job's pace (the median of them).
DRAINED = 0.6


def slow_link(job: JobSeries, live: Sequence[RankSeries], policy: WatchPolicy,
              at_check: Mapping[str, AtCheck], state: WatchState,
              addresses: Mapping[str, str], explained: set[str], unit: Unit,
              quiet: Mapping[str, float]) -> list[Finding]:
    """The host whose link holds the job, once the job's pace fell (job_slowed): the one in
    every pair of hosts between which the sender's TCP send queue stayed full (SENDQ_FULL
    bytes or more in FULL_SHARE of the window's samples). Slow both ways, a host is in the
    pair it sends on and the one it receives on. Named so, it is remembered (job.link.host)
    and stays the cause while it is an end of every full pair and the job's pace stays
    fallen. An end of every full pair whose sampler went quiet (quiet: host -> seconds
    without a sample; its connection crosses the same link) is that host too. One pair with
    neither end known is said as the link between them: what its sender resends does not
    tell which end (a shaper that queues drops nothing; a slow link both ways loses the
    sender's own ACKs on their way in), unless the sender's own qdisc holds a standing queue
    (a shaper on its sending side: tc, a container's bandwidth limit; or its NIC): the
    sender is named."""
    shares = pair_shares(live, policy.persist_s, addresses, explained)
    pairs = {p: q for p, (share, q) in shares.items() if share >= FULL_SHARE}
    # A job that keeps its pace with full send queues uses its network well (a data-parallel
    # all-reduce fills them all the time): that is no link holding it, and neither is a pace
    # that cannot be read.
    slowed = job_slowed(live, unit, policy)
    paced = any(r.early_rate.get(unit) for r in live if r.rid.role != "server")
    if not slowed and paced:
        _learn(job, shares)
    raw = pairs
    if slowed:
        pairs = _news(job, pairs, live, policy, state, addresses, explained)
    if not slowed or (pairs and job.link.host is not None
                      and not all(job.link.host in p for p in pairs)):
        job.link.host = None  # its pace is back, or a full pair it is no end of
    if not pairs:
        return _still_slowed(job, live, unit, policy) if slowed else []
    said = ", ".join(f"{a}->{b} {q >> 10} KiB" for (a, b), q in sorted(pairs.items()))
    if not slowed:
        if not paced:
            return []  # a pace that cannot be read says nothing either way
        # Said of the job (its hosts), not of the pairs full now: which are full changes from
        # one judgement to the next, and the line would be said again each time.
        hosts = tuple(sorted({r.rid.host for r in live}))
        return [WatchFinding("network", Status.PASS, hosts,
                             f"the job keeps its early pace with full send queues ({said}) "
                             f"for {policy.persist_s:g} s: it is network-bound (it uses its "
                             "links fully), and no link holds it back")]
    queued = f"waits in full send queues ({said}) for {policy.persist_s:g} s"
    blame = Blame("link", pairs=tuple(pairs))
    common = set.intersection(*({a, b} for a, b in pairs))
    silent = sorted(h for h in common if h in quiet)
    if job.link.host is not None:
        host, since = job.link.host, f"; in every full queue since {clock_of(job.link.since)}"
    elif (len(common) == 1 and len(pairs) > 1) or len(silent) == 1:
        host = silent[0] if len(silent) == 1 else next(iter(common))
        # A host hung or down goes quiet too while its peers' queues to it fill: said.
        since = (f"; its sampler's connection, on the same link, has had no sample for "
                 f"{quiet[host]:.0f} s: its link, or the host itself (hung, down)") \
            if host in quiet else ""
        job.link.host, job.link.since = host, _now(live, state)
    elif len(common) == 2:  # the link between two hosts, one way or both
        # Said once it has been full for twice the window: another pair may fill by then
        # and tell its ends apart.
        if not set(pairs) & set(full_pairs(live, 2 * policy.persist_s, addresses, explained)):
            return []
        now = _now(live, state)
        said_last = job.link.pair == frozenset(pairs) and \
            now - job.link.pair_at <= 1.5 * policy.interval_s
        if not said_last and any(set(p) & common for p in raw if p not in pairs):
            return []  # a full pair beside it not yet known as news: the next window tells
        job.link.pair, job.link.pair_at = frozenset(pairs), now  # said: kept while it holds
        sender, receiver = min(pairs)
        shaper = _shaper(sender, {r.rid.host for r in live}, state, policy) \
            if len(pairs) == 1 else None
        if shaper is not None:
            # A standing queue in its own qdisc: its sending side holds the job.
            host = job.link.host = sender
            job.link.since = now
            iface, kind, standing, backlog = shaper
            return [_named(host, queued, blame, state, policy, at_check, quiet, (
                f"; its own {kind} qdisc on {iface} holds a standing queue ({backlog >> 10} "
                f"KiB, in {standing:.0%} of its samples): {host}'s sending side is the narrowest "
                f"point (a shaper: tc, a container's bandwidth limit; or its NIC), not "
                f"{receiver}"))]
        way = f"from {sender} to {receiver}" if len(pairs) == 1 else \
            f"between {sender} and {receiver} (both ways)"
        share = _retransmitted(sender, state, policy)
        resent = "" if share is None else f" ({sender} resends {share:.1%})"
        return [WatchFinding("straggler", Status.FAIL, (sender, receiver),
                             f"the link {way} holds the job: data {queued}{resent}; either "
                             "end's link, or the switch between them", blame=blame)]
    else:
        return []  # full pairs with no end in common: no one link explains them
    return [_named(host, queued, blame, state, policy, at_check, quiet, since)]


def _named(host: str, queued: str, blame: Blame, state: WatchState, policy: WatchPolicy,
           at_check: Mapping[str, AtCheck], quiet: Mapping[str, float], since: str,
           ) -> Finding:
    """The finding that a host's link holds the job, with what its NIC carries now."""
    return WatchFinding("straggler", Status.FAIL, (host,),
                        f"{host}'s link holds the job: data to or from it {queued}"
                        # a quiet host's NIC figures are as old as its last sample
                        + ("" if host in quiet else
                           _nic(host, state, policy, at_check.get(host, AtCheck())))
                        + since,
                        blame=blame)


def _standing(host: str, state: WatchState, policy: WatchPolicy,
              ) -> Optional[tuple[str, str, float, int]]:
    """(interface, qdisc kind, share of samples, median bytes) of the host's qdisc that held
    a standing queue (BACKLOG_MIN bytes or more in STANDING_SHARE of its samples over the
    window), on an interface its jobs' traffic left by then; None: none did. A queue stands
    where a link's narrowest point is: a shaper or a NIC slower than the path on the sender
    holds it there; at a full pair's receiving end, or in the switch, it stands beyond the
    sender, whose qdisc stays empty. A queue on another interface (another container's,
    a guest's) is another tenant's: where the host said none that its jobs' traffic left
    by, no queue is counted."""
    samples = [s for s in state.hosts.get(host, ()) if s.qdiscs]
    samples = [s for s in samples if s.t >= samples[-1].t - policy.persist_s] \
        if samples else []
    carriers = {name for s in samples for name in s.carriers}
    if len(samples) < 3 or not carriers:
        return None
    queued: dict[tuple[str, str], list[int]] = {}
    for s in samples:
        for name, kind, _, backlog in s.qdiscs:
            if name in carriers:
                queued.setdefault((name, kind), []).append(backlog)
    best = None
    for (name, kind), qs in queued.items():
        share = sum(q >= BACKLOG_MIN for q in qs) / len(samples)
        if share >= STANDING_SHARE and (best is None or share > best[2]):
            best = (name, kind, share, int(median(qs)))
    return best


def _shaper(sender: str, hosts: set[str], state: WatchState, policy: WatchPolicy,
            ) -> Optional[tuple[str, str, float, int]]:
    """The sender's qdisc that held a standing queue over the window, where one did: what
    tells its sending side from the receiver's end of one full pair. Where most of the
    job's hosts hold one, it is the job's shape (every sender at its NIC's speed, every pod
    on its bandwidth limit), and tells nothing."""
    mine = _standing(sender, state, policy)
    if mine is None:
        return None
    standing = [h for h in hosts if h == sender or _standing(h, state, policy) is not None]
    return mine if 2 * len(standing) <= len(hosts) else None


def _learn(job: JobSeries, shares: Mapping[tuple[str, str], tuple[float, int]]) -> None:
    """Counts the window's full shares of each pair as the job's own at its pace."""
    job.link.paced_judgements += 1
    for pair, (share, _) in shares.items():
        job.link.paced_full[pair] = job.link.paced_full.get(pair, 0.0) + share


def usually_full(job: JobSeries) -> dict[tuple[str, str], float]:
    """{pair: its mean full share} of the pairs full in most samples while the job kept its
    pace, once that was judged for PACED_MIN windows."""
    n = job.link.paced_judgements
    if n < PACED_MIN:
        return {}
    return {p: total / n for p, total in job.link.paced_full.items() if total / n >= FULL_SHARE}


def _news(job: JobSeries, pairs: dict[tuple[str, str], int], live: Sequence[RankSeries],
          policy: WatchPolicy, state: WatchState, addresses: Mapping[str, str],
          explained: set[str]) -> dict[tuple[str, str], int]:
    """The full pairs that tell something once the job's pace fell: those not usually full at
    its pace, and those usually full that stay as full as then over twice the window while
    the job's other usually full pairs drain (their share now at most DRAINED of theirs
    then). Where most usually full pairs are full now, they tell nothing: the job slowed
    with its queues as they were. A pair said at the last judgement (its link, or one of the
    named host's) stays news while it stays full."""
    usual = usually_full(job)
    if not usual:
        return pairs
    # Over twice the window: a pair full for a moment, or the window's part before the pace
    # fell, is not what the pairs are like since.
    longer = pair_shares(live, 2 * policy.persist_s, addresses, explained)
    others = [p for p in usual if p not in pairs]
    # Most of them full now: the job slowed with its queues as they were, whichever few of
    # them look drained.
    drained = 2 * len(others) >= len(usual) and median(
        [longer.get(p, (0.0, 0))[0] / usual[p] for p in others]) <= DRAINED
    # What was said at the last judgement stays said while its pairs stay full (which of the
    # others drain changes from one window to the next).
    said = job.link.pair if _now(live, state) - job.link.pair_at <= 1.5 * policy.interval_s \
        else frozenset()
    return {p: q for p, q in pairs.items()
            if p not in usual or p in said or job.link.host in p
            or (drained and longer.get(p, (0.0, 0))[0] >= usual[p] - 1e-9)}


def _still_slowed(job: JobSeries, live: Sequence[RankSeries], unit: Unit,
                  policy: WatchPolicy) -> list[Finding]:
    """While the job crawls on a link named before, a window whose queues drained (a job at
    a hundredth of its pace sends little) is no pass: said as not judged (could not check,
    of that host), failing nobody."""
    if job.link.host is None:
        return []
    paces = [p for r in live if (p := fallen_pace(r, unit, policy)) is not None]
    pace = f" at {min(paces):.2f} x its early pace" if paces else ""
    return [WatchFinding("straggler", Status.COULD_NOT_CHECK, (job.link.host,),
                         f"the job still steps{pace}; {job.link.host}'s link held it (in "
                         f"every full send queue since {clock_of(job.link.since)}), and no "
                         f"send queue stayed full for {policy.persist_s:g} s now: could not "
                         "judge what holds it in this window")]


def _now(live: Sequence[RankSeries], state: WatchState) -> float:
    """The time of the newest sample of the job's ranks, on the controller's clock."""
    return max(state.at(r.rid.host, r.latest.t) for r in live)


def _retransmitted(host: str, state: WatchState, policy: WatchPolicy) -> Optional[float]:
    """The share of the TCP segments the host sent in the window that it sent again."""
    samples = [s for s in state.hosts.get(host, ()) if s.tcp_out is not None]
    samples = [s for s in samples if s.t >= samples[-1].t - policy.persist_s] if samples else []
    if len(samples) < 2:
        return None
    a, b = samples[0], samples[-1]
    sent = (b.tcp_out or 0) - (a.tcp_out or 0)
    return ((b.tcp_retrans or 0) - (a.tcp_retrans or 0)) / sent if sent > 0 else None


def _nic(host: str, state: WatchState, policy: WatchPolicy, check: AtCheck) -> str:
    """"; its NIC carries 9.6 Mbit/s now (941 Mbit/s at the check)": the busiest NIC of the
    host over the later half of the window, either way, against its links' median at the
    check."""
    samples = [s for s in state.hosts.get(host, ()) if s.nics]
    # The later half of the window: the fault covers it, whatever came before it.
    samples = [s for s in samples if s.t >= samples[-1].t - policy.persist_s / 2] \
        if samples else []
    if len(samples) < 2:
        return ""
    a, b = samples[0], samples[-1]
    before = {n[0]: n for n in a.nics}
    best = 0.0
    for n in b.nics:
        if n[0] in before and b.t > a.t:
            best = max(best, max(n[1] - before[n[0]][1], n[3] - before[n[0]][3]) * 8
                       / (b.t - a.t))
    at = f" ({check.link_bps / 1e6:.3g} Mbit/s at the check)" if check.link_bps else ""
    return f"; its NIC carries {best / 1e6:.3g} Mbit/s now{at}"
