"""What the watch's rules share: the thresholds that set a rank apart, what preflight
measured of a host at its check (AtCheck), a rank's two half-windows and its pace against its
own early pace, the send queues that stayed full, why a rank is short of CPU, and a time as
the findings say it."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Optional

from preflight.model.findings import Finding, Status
from preflight.model.watch import WatchPolicy
from preflight.watch.medians import median
from preflight.watch.series import (
    RankSeries,
    Span,
    Unit,
)

# Busy share (cores on a CPU or waiting for one) that sets a rank apart from its peers:
# at least this many times theirs, and this much more.
BUSY_RATIO, BUSY_MORE = 1.5, 0.2


THROTTLED_SHARE = 0.2  # of its cgroup's periods: the quota is what holds it


RUNQUEUE_SHARE = 0.3  # seconds a second waiting for a CPU: the host's other work holds it
WAIT_MORE = 0.2  # seconds waited per second run, above BUSY_RATIO x its peers': held, not shared
PRESSURE_MORE = 10.0  # points of a host's CPU pressure (PSI) above its peers' hosts': held


# Bytes queued to one peer in most samples of the window (a link that cannot drain them;
# a healthy one empties its queue between steps, and a full one dips now and then).
SENDQ_FULL, FULL_SHARE = 32 << 10, 0.75


@dataclass(frozen=True)
class AtCheck:
    """What preflight measured of a host when it gave the job its GO."""

    cores: Optional[float] = None  # effective cores for the job
    link_bps: Optional[float] = None  # the median of its iperf3 links


def blamed(found: Sequence[Finding]) -> set[str]:
    """The hosts a finding so far names for something (not a pass line: the job's shape)."""
    return {h for f in found if f.status is not Status.PASS for h in f.hosts}


def full_pairs(live: Sequence[RankSeries], window_s: float, addresses: Mapping[str, str],
               explained: set[str]) -> dict[tuple[str, str], int]:
    """{(sender, receiver): the median bytes queued} of the pairs whose sender's queue to
    the receiver was full in FULL_SHARE of its samples over the last window_s."""
    return {p: q for p, (share, q) in pair_shares(live, window_s, addresses, explained).items()
            if share >= FULL_SHARE}


def pair_shares(live: Sequence[RankSeries], window_s: float, addresses: Mapping[str, str],
                explained: set[str]) -> dict[tuple[str, str], tuple[float, int]]:
    """{(sender, receiver): (the share of its samples over the last window_s in which the
    sender's queue to the receiver was full, the median bytes queued)}, of the pairs with
    anything queued in the window (of its busiest rank on the sender)."""
    pairs: dict[tuple[str, str], tuple[float, int]] = {}
    for r in live:
        start = r.latest.t - window_s
        if r.first_t is None or r.first_t > start or r.queued_at is None \
                or r.queued_at < start:
            continue  # nothing queued to any peer in the window: no pair of its
        inside = []
        for s in reversed(r.samples):  # in time order: the window's are the last ones
            if s.t < start:
                break
            inside.append(s)
        if len(inside) < 3:
            continue
        queued: dict[str, list[int]] = {}
        for s in inside:
            for p, q in s.sendq:
                queued.setdefault(p, []).append(q)
        for peer, qs in queued.items():
            qs += [0] * (len(inside) - len(qs))  # samples with nothing queued to it
            dst = addresses.get(peer)
            if dst is not None and dst != r.rid.host and not {dst, r.rid.host} & explained:
                key = (r.rid.host, dst)
                got = (sum(q >= SENDQ_FULL for q in qs) / len(qs), int(median(qs)))
                pairs[key] = max(pairs.get(key, got), got)
    return pairs


def fallen_pace(r: RankSeries, unit: Unit, policy: WatchPolicy) -> Optional[float]:
    """The rank's pace over the later half of the window as a share of its own early pace,
    where it stepped below (1 - margin) of that pace through both halves; None where it did
    not, or where its pace cannot be read (no early pace yet, no progress measure)."""
    key = ("fallen", unit, policy.persist_s, policy.interval_s, policy.margin)
    if key in r.memo:  # several rules ask it of every rank, every judgement
        return r.memo[key]  # type: ignore[no-any-return]
    got = r.memo[key] = _fallen_pace(r, unit, policy, r.early_rate.get(unit))
    return got


def _fallen_pace(r: RankSeries, unit: Unit, policy: WatchPolicy, early: Optional[float]
                 ) -> Optional[float]:
    h = rank_halves(r, unit, policy)
    if h is None or not early or h[0].progress is None or h[1].progress is None:
        return None
    # A pace counted in steps is uncertain by one step: a half-window where 2.5 steps were
    # due counts 2 or 3 as the lines fall, and 2 reads as 20 % slower. A half is below the
    # bar only where one more step would still leave it there; a job of few steps a window
    # (a slow step, a short window) is then fallen only when it nearly stops.
    bar = (1 - policy.margin) * early
    if not all(s.progress is not None and s.progress + 1 < bar * s.dt for s in h):
        return None
    return h[1].progress / h[1].dt / early


def job_slowed(ranks: Sequence[RankSeries], unit: Unit, policy: WatchPolicy) -> bool:
    """Whether most of the job's stepping ranks (workers, trainers) whose pace can be read
    step below their own early pace through the window."""
    # Those whose pace can be read: where only rank 0 prints step lines, its peers' logs
    # grow without them and their pace is no evidence either way.
    stepping = [r for r in ranks if r.rid.role != "server" and r.early_rate.get(unit)]
    fallen = [r for r in stepping if fallen_pace(r, unit, policy) is not None]
    return bool(stepping) and 2 * len(fallen) > len(stepping)


def rank_halves(r: RankSeries, unit: Unit, policy: WatchPolicy) -> Optional[tuple[Span, Span]]:
    """The rank's change over each half of the persistence window ending at its last
    sample; None until the window is covered."""
    return r.halves(unit, policy.persist_s, policy.interval_s)


def is_throttled(span: Span) -> bool:
    return bool(span.periods and span.throttled / span.periods >= THROTTLED_SHARE)


def is_saturated(span: Span) -> bool:
    return is_throttled(span) or span.wait_s / span.dt >= RUNQUEUE_SHARE


def wait_per_run(span: Span) -> Optional[float]:
    """Seconds the rank waited for a CPU per second it ran on one; None where it hardly ran."""
    run = span.busy_s - span.wait_s
    return span.wait_s / run if run > 0.02 * span.dt else None


def held_by_host(span: Span, peers_per_run: Optional[float],
                 pressed: Optional[bool] = None) -> bool:
    """Whether something on the rank's host holds it: its quota throttles it, or it waits for
    a CPU (RUNQUEUE_SHARE a second) longer per second it runs than its peers do (peers_per_run:
    their median wait_per_run; None where none ran). A rank busier than its peers waits for a
    CPU longer a second only because it asks for one more often: where hosts share their cores
    (containers on one node, a test rig's namespaces) every rank waits about as long per
    second run, and on a cluster the peers' waits are near zero. Where its peers hardly ran
    (asleep in a collective, waiting for it), its host's CPU pressure against theirs tells
    (pressed: host_pressed's; None where not known: the wait alone then)."""
    if is_throttled(span):
        return True
    if span.wait_s / span.dt < RUNQUEUE_SHARE:
        return False
    own = wait_per_run(span)
    if own is None or peers_per_run is None:
        return pressed is not False
    return own >= BUSY_RATIO * peers_per_run + WAIT_MORE


def host_pressed(host: str, peers: Sequence[str], pressure: Mapping[str, float]
                 ) -> Optional[bool]:
    """Whether the host's CPU pressure (PSI: % of the last 10 s some task waited for a CPU)
    is PRESSURE_MORE points above the median of its peers' other hosts'; None where its own
    or none of theirs is known (a kernel without PSI, a job on one host)."""
    others = [pressure[h] for h in set(peers) if h != host and h in pressure]
    if host not in pressure or not others:
        return None
    return pressure[host] >= median(others) + PRESSURE_MORE


def why_short(r: RankSeries, span: Span, at_check: Mapping[str, AtCheck]) -> str:
    """What holds the rank, from its own figures: its cgroup's quota, the host's other work,
    or its own computing; with the host's cores now against those at the check."""
    s = r.latest
    check = at_check.get(r.rid.host, AtCheck())
    now = ""
    if s.quota_cores is not None and check.cores:
        if s.quota_cores < 0.9 * check.cores:
            now = (f" ({s.quota_cores:g} of {check.cores:g} cores now: a cgroup quota set "
                   f"since; {check.cores:g} at the check)")
        else:
            now = f" ({s.quota_cores:g} cores, as at the check)"
    elif check.cores:
        now = f" ({check.cores:g} cores at the check, no quota now)"
    if span.periods and span.throttled / span.periods >= THROTTLED_SHARE:
        return (f": its cgroup's CPU quota throttles it (throttled in "
                f"{span.throttled / span.periods:.0%} of periods){now}")
    if span.wait_s / span.dt >= RUNQUEUE_SHARE:
        return (f": it waits for a CPU {span.wait_s / span.dt:.2f} s a second (other work "
                f"on {r.rid.host} takes its cores){now}")
    return f": it computes longer than its peers{now}"


def clock_of(t: float) -> str:
    """A time as a message says it: on the controller's clock (a host's own time is first
    brought onto it with WatchState.at), so that the times said of different hosts compare."""
    return time.strftime("%H:%M:%S", time.localtime(t))
