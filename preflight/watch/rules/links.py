"""A slow link: once the job's pace fell against its own early pace, the host in every
pair whose sender's send queue stayed full; with one pair, what the sender resends tells
which end."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Optional

from preflight.model.findings import Finding, Status
from preflight.model.watch import Blame, WatchFinding, WatchPolicy
from preflight.watch.rules.shared import AtCheck, fallen_pace, full_pairs
from preflight.watch.series import (
    RankSeries,
    Unit,
    WatchState,
)

# Segments sent again, of those sent, by the sender of the one full pair: at RESENT_FAR or
# more they are lost downstream (a switch port, the receiver's link); below RESENT_NEAR its
# own link holds it back (its own queue pushes back and drops little); in between, either.
RESENT_NEAR, RESENT_FAR = 0.005, 0.03


def _job_slowed(live: Sequence[RankSeries], unit: Unit, policy: WatchPolicy) -> bool:
    """Whether most of the job's stepping ranks (workers, trainers) step below their own
    early pace through the window. A job that keeps its pace with full send queues uses its
    network well (a data-parallel all-reduce fills them all the time): that is no link
    holding it, and neither is a pace that cannot be read."""
    stepping = [r for r in live if r.rid.role != "server"]
    fallen = [r for r in stepping if fallen_pace(r, unit, policy) is not None]
    return bool(stepping) and 2 * len(fallen) > len(stepping)


def slow_link(live: Sequence[RankSeries], policy: WatchPolicy,
              at_check: Mapping[str, AtCheck], state: WatchState,
              addresses: Mapping[str, str], explained: set[str], unit: Unit
              ) -> list[Finding]:
    """The host whose link holds the job, once the job's pace fell (_job_slowed): the one in
    every pair of hosts between which the sender's TCP send queue stayed full (SENDQ_FULL
    bytes or more in FULL_SHARE of the window's samples). Slow both ways, a host is in the
    pair it sends on and the one it receives on; with one pair, what its sender resends
    tells which end (or it is said as the link between them)."""
    pairs = full_pairs(live, policy.persist_s, addresses, explained)
    if not pairs:
        return []
    said = ", ".join(f"{a}->{b} {q >> 10} KiB" for (a, b), q in sorted(pairs.items()))
    if not _job_slowed(live, unit, policy):
        if not any(r.early_rate.get(unit) for r in live if r.rid.role != "server"):
            return []  # a pace that cannot be read says nothing either way
        # Said of the job (its hosts), not of the pairs full now: which are full changes from
        # one judgement to the next, and the line would be said again each time.
        hosts = tuple(sorted({r.rid.host for r in live}))
        return [WatchFinding("network", Status.PASS, hosts,
                             f"the job keeps its early pace with full send queues ({said}) "
                             f"for {policy.persist_s:g} s: it is network-bound (it uses its "
                             "links fully), and no link holds it back")]
    common = set.intersection(*({a, b} for a, b in pairs))
    if not common:
        return []
    queued = f"waits in full send queues ({said}) for {policy.persist_s:g} s"
    if len(common) == 1:
        host = next(iter(common))
        return [WatchFinding("straggler", Status.FAIL, (host,),
                             f"{host}'s link holds the job: data to or from it {queued}"
                             + _nic(host, state, policy, at_check.get(host, AtCheck())),
                             blame=Blame("link", pairs=tuple(pairs)))]
    # One pair: its sender's own link, or the receiver's; what the sender resends tells.
    # Said once the pair has been full for twice the window: another pair may fill by then,
    # and the resends are then counted over a window the fault covers.
    sender, receiver = next(iter(pairs))
    if (sender, receiver) not in full_pairs(live, 2 * policy.persist_s, addresses, explained):
        return []
    share = _retransmitted(sender, state, policy)
    if share is not None and share >= RESENT_FAR:
        host, why = receiver, (f"; {sender} sends {share:.1%} of its segments again: they "
                               f"are lost on the way to {receiver}")
    elif share is not None and share < RESENT_NEAR:
        host, why = sender, (f"; {sender} sends only {share:.1%} of its segments again: "
                             "they wait on its own link")
    else:
        resent = "" if share is None else f" ({sender} resends {share:.1%})"
        return [WatchFinding("straggler", Status.FAIL, (sender, receiver),
                             f"the link from {sender} to {receiver} holds the job: data "
                             f"{queued}{resent}; either end's link, or the switch between "
                             "them", blame=Blame("link", pairs=tuple(pairs)))]
    return [WatchFinding("straggler", Status.FAIL, (host,),
                         f"{host}'s link holds the job: data to or from it {queued}{why}"
                         + _nic(host, state, policy, at_check.get(host, AtCheck())),
                         blame=Blame("link", pairs=tuple(pairs)))]


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
