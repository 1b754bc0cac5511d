"""The watch's judgement: pure functions from what was sampled to findings. Nothing here reads
a host.

In a synchronous job every rank steps at the pace of the slowest, so progress alone names
nobody: the straggler is the rank that keeps busy (on a CPU, or waiting for one) while its
peers sleep in the collective waiting for it. Where ranks do step at their own pace (PS
trainers in async mode), the straggler is the one slower than its peers' median. Either
way a rank is named only when it holds in both halves of the persistence window, and a
stopped or dead rank at once."""

from __future__ import annotations

import math
import re
import signal
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Optional

from preflight.common.paddlelog import CRASHED, ERROR_LINE, GLOO_PEER, LOST_PEER
from preflight.common.units import hostlist
from preflight.model.findings import Finding, Status
from preflight.model.watch import LaunchFailure, RankId, WatchPolicy
from preflight.watch import gpus
from preflight.watch.series import (
    UNIT_WORDS,
    JobSeries,
    Pool,
    RankSeries,
    Span,
    Unit,
    WatchState,
    median,
)
from preflight.watch.starting import starting

# Busy share (cores on a CPU or waiting for one) that sets a rank apart from its peers:
# at least this many times theirs, and this much more.
BUSY_RATIO, BUSY_MORE = 1.5, 0.2
THROTTLED_SHARE = 0.2  # of its cgroup's periods: the quota is what holds it
RUNQUEUE_SHARE = 0.3  # seconds a second waiting for a CPU: the host's other work holds it
STALE_INTERVALS = 3  # a host with no sample for this many intervals cannot be judged
MIN_COUNT = 8  # steps (or lines) a half-window of a typical rank must count to judge paces
STOPPED = ("T",)  # SIGSTOP, a suspended shell: nothing moves it on but a SIGCONT
# Held by a tracer (ptrace: a debugger, strace, a py-spy dump): someone is looking at it,
# which is no fault of its host; said, never failed or acted on.
TRACED = "t"
# Bytes queued to one peer in most samples of the window (a link that cannot drain them;
# a healthy one empties its queue between steps, and a full one dips now and then).
SENDQ_FULL, FULL_SHARE = 32 << 10, 0.75
# Segments sent again, of those sent, by the sender of the one full pair: at RESENT_FAR or
# more they are lost downstream (a switch port, the receiver's link); below RESENT_NEAR its
# own link holds it back (its own queue pushes back and drops little); in between, either.
RESENT_NEAR, RESENT_FAR = 0.005, 0.03


@dataclass(frozen=True)
class AtCheck:
    """What preflight measured of a host when it gave the job its GO."""

    cores: Optional[float] = None  # effective cores for the job
    link_bps: Optional[float] = None  # the median of its iperf3 links


def judge(state: WatchState, policy: WatchPolicy, now: float,
          at_check: Mapping[str, AtCheck], addresses: Optional[Mapping[str, str]] = None,
          final: bool = True) -> list[Finding]:
    """Returns the findings of the watch so far: per job, its stopped, dead and straggling
    ranks, or its hang; per host, why it cannot be judged; a pass line per healthy job."""
    out: list[Finding] = []
    stale = {h: now - t for h, t in state.last_tick.items()
             if now - t > STALE_INTERVALS * policy.interval_s}
    for host in sorted(stale):
        # Its ranks' last figures are stale, not evidence: they leave every rule (no
        # straggler, hang or death is read from them) and are said as not judged.
        ranks = [r.rid.name() for job in state.jobs.values() for r in job.live()
                 if r.rid.host == host]
        out.append(Finding("watch", Status.COULD_NOT_CHECK, (host,),
                           f"no sample from {host} for {stale[host]:.0f} s (its sampler or "
                           "its connection is stuck)"
                           + (f": could not judge {', '.join(ranks)}" if ranks else "")))
    for job in state.jobs.values():
        out.extend(_job(job, policy, at_check, state, addresses or {}, stale))
    if not state.jobs and state.last_tick:
        # While watching, a job may be yet to start; at the end there was none to watch.
        out.append(Finding("watch", Status.COULD_NOT_CHECK if final else Status.SKIP,
                           tuple(sorted(state.last_tick)),
                           f"no Paddle job runs on {hostlist(sorted(state.last_tick))} "
                           "(no paddle.distributed.launch process there)"
                           + ("" if final else "; waiting for one")))
    return out


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
        died = _stopped_or_dead(job, present, live, policy, state, quiet, addresses)
        if quiet and not died:
            return []  # its ranks on a host gone quiet may run yet: not ended
        end = max([t for t, _ in job.gone.values()] +
                  [r.state_since[1] for r in present if r.latest.state == "Z"], default=0.0)
        return died or [Finding("ended", Status.PASS, tuple(job.hosts()),
                                f"{len(job.ranks)} ranks of {job.key} ended by {_clock(end)}, "
                                "none of them in error", {"ranks": ()})]
    out = _stopped_or_dead(job, present, live, policy, state, quiet, addresses)
    whole = starting(job, state, policy)
    if whole is not None:  # its ranks wait for nodes yet to start: nothing to pace
        return [*out, whole]
    out.extend(_hang(job, live, policy, state))
    if any(f.check == "hang" for f in out):
        return out  # no pace to compare while nothing moves
    unit = job.unit()
    out.extend(_server_holds_trainers(live, unit, policy, at_check))
    named: set[RankId] = {rid for f in out for rid in f.data.get("ranks", ())}
    for role in ("worker", "trainer", "server"):
        group = [r for r in live if r.rid.role == role and r.rid not in named]
        if len(group) < 2:
            continue
        # The ranks of a collective job step together: a pace apart is only where each
        # steps on its own (PS trainers).
        found = [] if role == "worker" else _slower(group, unit, policy, at_check, job)
        if role == "worker" or not found:
            found += _busier(group, unit, policy, at_check, job, [f.data["ranks"][0]
                                                                 for f in found])
        out.extend(found)
    out.extend(_starved_servers(live, unit, policy, at_check, addresses,
                                _blamed(out)))
    # A pair with a host already named is that host's doing (a starved rank drains its
    # sockets slowly): the link is blamed only where nothing else explains it.
    out.extend(_link(live, policy, at_check, state, addresses,
                     _blamed(out), unit))
    out = gpus.findings(live, unit, state, policy, out)
    out.extend(gpus.unreadable(job.hosts(), live, state))
    out.extend(_progress_unread(live))
    if all(f.status is Status.PASS for f in out):  # nothing but the job's shape said
        out.append(_pace(job, live, unit, policy))
    return out


def _blamed(found: Sequence[Finding]) -> set[str]:
    """The hosts a finding so far names for something (not a pass line: the job's shape)."""
    return {h for f in found if f.status is not Status.PASS for h in f.hosts}


def _full_pairs(live: Sequence[RankSeries], window_s: float, addresses: Mapping[str, str],
                explained: set[str]) -> dict[tuple[str, str], int]:
    """{(sender, receiver): the median bytes queued} of the pairs whose sender's queue to
    the receiver was full in FULL_SHARE of its samples over the last window_s."""
    pairs: dict[tuple[str, str], int] = {}
    for r in live:
        end = r.latest.t
        inside = [s for s in r.samples if s.t >= end - window_s]
        if r.first_t is None or r.first_t > end - window_s or len(inside) < 3:
            continue
        queued: dict[str, list[int]] = {}
        for s in inside:
            for p, q in s.sendq:
                queued.setdefault(p, []).append(q)
        for peer, qs in queued.items():
            qs += [0] * (len(inside) - len(qs))  # samples with nothing queued to it
            if sum(q >= SENDQ_FULL for q in qs) < FULL_SHARE * len(qs):
                continue
            dst = addresses.get(peer)
            if dst is not None and dst != r.rid.host and not {dst, r.rid.host} & explained:
                key = (r.rid.host, dst)
                pairs[key] = max(pairs.get(key, 0), int(median(qs)))
    return pairs


def _job_slowed(live: Sequence[RankSeries], unit: Unit, policy: WatchPolicy) -> bool:
    """Whether most of the job's stepping ranks (workers, trainers) step below their own
    early pace through the window. A job that keeps its pace with full send queues uses its
    network well (a data-parallel all-reduce fills them all the time): that is no link
    holding it, and neither is a pace that cannot be read."""
    stepping = [r for r in live if r.rid.role != "server"]
    fallen = [r for r in stepping if _fallen(r, unit, policy) is not None]
    return bool(stepping) and 2 * len(fallen) > len(stepping)


def _link(live: Sequence[RankSeries], policy: WatchPolicy, at_check: Mapping[str, AtCheck],
          state: WatchState, addresses: Mapping[str, str], explained: set[str],
          unit: Unit) -> list[Finding]:
    """The host whose link holds the job, once the job's pace fell (_job_slowed): the one in
    every pair of hosts between which the sender's TCP send queue stayed full (SENDQ_FULL
    bytes or more in FULL_SHARE of the window's samples). Slow both ways, a host is in the
    pair it sends on and the one it receives on; with one pair, what its sender resends
    tells which end (or it is said as the link between them)."""
    pairs = _full_pairs(live, policy.persist_s, addresses, explained)
    if not pairs or not _job_slowed(live, unit, policy):
        return []
    common = set.intersection(*({a, b} for a, b in pairs))
    if not common:
        return []
    said = ", ".join(f"{a}->{b} {q >> 10} KiB" for (a, b), q in sorted(pairs.items()))
    queued = f"waits in full send queues ({said}) for {policy.persist_s:g} s"
    if len(common) == 1:
        host = next(iter(common))
        return [Finding("straggler", Status.FAIL, (host,),
                        f"{host}'s link holds the job: data to or from it {queued}"
                        + _nic(host, state, policy, at_check.get(host, AtCheck())),
                        {"ranks": (), "pairs": tuple(pairs)})]
    # One pair: its sender's own link, or the receiver's; what the sender resends tells.
    # Said once the pair has been full for twice the window: another pair may fill by then,
    # and the resends are then counted over a window the fault covers.
    sender, receiver = next(iter(pairs))
    if (sender, receiver) not in _full_pairs(live, 2 * policy.persist_s, addresses, explained):
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
        return [Finding("straggler", Status.FAIL, (sender, receiver),
                        f"the link from {sender} to {receiver} holds the job: data {queued}"
                        f"{resent}; either end's link, or the switch between them",
                        {"ranks": (), "pairs": tuple(pairs)})]
    return [Finding("straggler", Status.FAIL, (host,),
                    f"{host}'s link holds the job: data to or from it {queued}{why}"
                    + _nic(host, state, policy, at_check.get(host, AtCheck())),
                    {"ranks": (), "pairs": tuple(pairs)})]


def _starved_servers(live: Sequence[RankSeries], unit: Unit, policy: WatchPolicy,
                     at_check: Mapping[str, AtCheck], addresses: Mapping[str, str],
                     explained: set[str]) -> list[Finding]:
    """A PS server short of CPU through both halves of the window: its quota throttles it,
    or it waits for a CPU far longer than the job's other ranks do. In async PS its trainers
    step on at their own pace while it falls behind (seen with Paddle 2.6.2: 45 steps a
    second before and after a 0.05-core quota on the server, throttled in 95-100 % of its
    periods): it warns, the trainers' updates reaching it late. Where their send queues to
    it stay full as well, it holds them (fail), and that is the server's CPU, not the link.
    A trainer slowed alike with its peers is _server_holds_trainers'; a collective job's
    starved worker is _busier's (busy while its peers wait)."""
    if not any(r.rid.role == "server" for r in live):
        return []
    halves = {r.rid: _halves(r, unit, policy) for r in live}
    pairs = _full_pairs(live, policy.persist_s, addresses, explained)
    out = []
    waits = Pool(x[i].wait_s / x[i].dt for x in halves.values() if x is not None
                 for i in (0, 1))
    for r in live:
        h = halves[r.rid]
        if r.rid.role != "server" or h is None or r.rid.host in explained:
            continue
        # Waiting for a CPU is judged against the others' waits, known once their window
        # is covered too (ranks on shared cores all wait some).
        usual = waits.median_without(*(span.wait_s / span.dt for span in h))
        if usual is None:
            usual = math.inf
        if not all(_throttled(span) or span.wait_s / span.dt >= max(
                RUNQUEUE_SHARE, BUSY_RATIO * usual + BUSY_MORE) for span in h):
            continue
        host = r.rid.host
        full = {p: q for p, q in pairs.items() if p[1] == host}
        said = ", ".join(f"{a}->{b} {q >> 10} KiB" for (a, b), q in sorted(full.items()))
        out.append(Finding(
            "straggler", Status.FAIL if full else Status.WARN, (host,),
            f"{r.rid.name()} is short of CPU for {policy.persist_s:g} s"
            + _why(r, h[1], at_check) + (
                f"; its trainers' data to it waits in full send queues ({said})" if full
                else "; its trainers step on at their own pace, their updates reaching it "
                "late"),
            {"ranks": (r.rid,), "pairs": tuple(full)}))
        explained.add(host)
    return out


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


def _stopped_or_dead(job: JobSeries, present: Sequence[RankSeries],
                     live: Sequence[RankSeries], policy: WatchPolicy,
                     state: WatchState, quiet: Mapping[str, float],
                     addresses: Mapping[str, str]) -> list[Finding]:
    failure = state.launch_failure
    out = []
    others = len(live) - 1
    exits: list[Exit] = []
    for r in present:
        s = r.latest
        if s.state in STOPPED:
            out.append(Finding(
                "stopped", Status.FAIL, (r.rid.host,),
                f"{r.rid.name()} is stopped (state {s.state}: a SIGSTOP or a suspended shell) "
                f"since {_clock(r.state_since[1])}"
                + (f"; its {others} peers wait on it" if others else ""),
                {"ranks": (r.rid,), "since": r.state_since[1]}))
        elif s.state == TRACED:
            out.append(Finding(
                "traced", Status.WARN, (r.rid.host,),
                f"{r.rid.name()} is held by a tracer (state t: a debugger, strace or py-spy "
                f"attached) since {_clock(r.state_since[1])}"
                + (f"; its {others} peers wait on it while it is" if others else "")
                + ": someone is looking at it, no fault of its host; not acted on",
                {"ranks": (r.rid,), "since": r.state_since[1]}))
        elif s.state == "Z":  # exited, not yet reaped: judged as a rank gone
            exits.append(Exit(r.state_since[1], r.rid, s.log_tail, _oom_rise(r),
                              state.at(r.rid.host, r.state_since[1])))
    exits += [Exit(t, rid, tail, job.oom_killed.get(rid), state.at(rid.host, t))
              for rid, (t, tail) in job.gone.items()]
    exits.sort(key=lambda e: e.at)
    if failure is None and not live and _whole_stop(exits, policy):
        span = exits[-1].at - exits[0].at
        return out + [Finding(
            "ended", Status.WARN, tuple(job.hosts()),
            f"the job {job.key} was stopped as a whole: its {len(exits)} ranks ended by a "
            f"signal to stop within {span:.0f} s of each other, none failing first (a Ctrl-C "
            "of its launchers or of preflight launch, a scancel): no rank or host to blame",
            {"ranks": ()})]
    now = max((state.at(r.rid.host, r.latest.t) for r in present), default=0.0)
    if failure is None and live and any(
            TERMED.search(_tail_text(e)) and now - e.at < STOP_WINDOW_INTERVALS
            * policy.interval_s for e in exits):
        # A rank stopped by a signal while its peers run: a stop of the whole job (a Ctrl-C,
        # scancel) ends every rank within seconds; until then no end is judged, neither a
        # cause nor a death (a rank KILLed after its TERM looks like one that died first).
        return out
    causes, after = _causes(exits, policy)
    out += [_cause_finding(e, after, failure) for e in causes]
    explained = {e.rid for e in causes} | {e.rid for e in after}
    lost = [e for e in exits if e.rid not in explained and e.error is not None
            and LOST_PEER.search(_tail_text(e))]
    cause = _quiet_cause(quiet, lost, addresses) if lost and quiet and not causes else None
    if cause is not None:
        # Ranks died for a lost peer, none of theirs ended first, and a host of the job went
        # quiet: the peer they lost is there (its link cut, the host hung or down), and
        # they are its victims, not culprits.
        out.append(cause)
        explained |= {e.rid for e in lost}
    for e in exits:
        if e.rid in explained:
            continue
        why = _died(e, live, policy, job.unit(),
                    failure if failure is not None and failure.host == e.rid.host else None,
                    state)
        if why:
            out.append(Finding("dead", Status.FAIL, (e.rid.host,),
                               f"{e.rid.name()} exited at {_clock(e.t)} {why}",
                               {"ranks": (e.rid,), "tail": e.tail, "error": e.error}))
    if failure is not None and not live and failure.host in job.launcher_hosts() \
            and not any(f.check == "dead" for f in out):
        # The job ended, its launch failed, and no rank's end says why: its ranks there were
        # never seen to exit (or never seen), or they ended as if the job had.
        out.append(Finding("dead", Status.FAIL, (failure.host,),
                           f"{failure.host}'s launcher failed ({failure.why}) at "
                           f"{_clock(failure.at)}: {LAUNCH_STOPPED}", {"ranks": ()}))
    return out


@dataclass(frozen=True)
class Exit:
    t: float  # on its host's clock (as said)
    rid: RankId
    tail: Sequence[str]
    oom: Optional[tuple[int, int]] = None  # its memory cgroup's OOM kills rose: before, after
    at: float = 0.0  # t on the controller's clock: what orders exits on different hosts

    @property
    def error(self) -> Optional[str]:
        return _error(self.tail)


def _error(tail: Sequence[str]) -> Optional[str]:
    """The line of a log's tail that says what went wrong: its last error line where it has
    one ("RuntimeError: ...", Paddle's "FatalError: `Process abort signal` ..."), else its
    last line of a crash ("Segmentation fault", "terminate called ...")."""
    if not any(CRASHED.search(ln) for ln in tail):
        return None
    return next((ln.strip() for ln in reversed(tail) if ERROR_LINE.match(ln)),
                None) or next(ln for ln in reversed(tail) if CRASHED.search(ln))


# What a rank prints as a stop's signal ends it (Paddle names each signal it catches: "FatalError:
# `Termination signal` is detected", "*** SIGTERM"; Python's own KeyboardInterrupt for a
# Ctrl-C). A stop of the whole job (a Ctrl-C, scancel) ends every rank so within seconds.
TERMED = re.compile(r"Termination signal|Interrupt signal|\*\*\* SIG(?:TERM|INT)\b|"
                    r"^KeyboardInterrupt", re.M)
STOP_WINDOW_INTERVALS = 2

# What `preflight launch` does once a host's launcher fails.
LAUNCH_STOPPED = "preflight launch stopped the job on every host"


def _causes(exits: Sequence[Exit], policy: WatchPolicy) -> tuple[list[Exit], list[Exit]]:
    """The ranks whose end ended their peers, and the peers' failures they caused. A rank's
    peers fail for its loss (gloo aborts, a connection closes, the launch stops them with a
    TERM), each with an error of its own that names the symptom: the cause is the rank that
    failed otherwise no later than a sample after the first of them. Its own error says why;
    a rank the OOM killer takes (SIGKILL) says nothing, where Paddle writes an error for
    every signal a rank can catch. Named once, on its host; ([], []) where nothing folds."""
    lost = [e for e in exits if e.error is not None and LOST_PEER.search(_tail_text(e))]
    if not lost:
        return [], []
    # Its peers fail within seconds of it (gloo at once; the launch's TERM once the host's
    # launcher has noticed): an end a persistence window before theirs is not theirs.
    start, window = lost[0].at - policy.persist_s, lost[0].at + policy.interval_s
    own = [e for e in exits if e.error is not None and e not in lost and start <= e.at <= window]
    causes = own or [e for e in exits if e.error is None and start <= e.at <= window]
    if not causes:
        return [], []
    since = causes[0].at - policy.interval_s
    return causes, [e for e in lost if e.at >= since]


def _whole_stop(exits: Sequence[Exit], policy: WatchPolicy) -> bool:
    """Whether the job's ranks (all ended) were stopped together: every one by a signal to
    stop that it caught (TERM, INT) or silently (KILLed after), within a few intervals, at
    least one saying so, none with an error of its own or the OOM killer's."""
    if not exits or exits[-1].at - exits[0].at > STOP_WINDOW_INTERVALS * policy.interval_s:
        return False
    termed = [bool(TERMED.search(_tail_text(e))) for e in exits]
    return any(termed) and all(t or (e.error is None and e.oom is None)
                               for t, e in zip(termed, exits))


def _tail_text(e: Exit) -> str:
    return "\n".join(e.tail)


def _oom_rise(r: RankSeries) -> Optional[tuple[int, int]]:
    """Its memory cgroup's OOM kills, before and after, where they rose over its samples."""
    counts = [s.oom_kills for s in r.samples if s.oom_kills is not None]
    return (counts[0], counts[-1]) if counts and counts[-1] > counts[0] else None


def _oom_said(oom: tuple[int, int]) -> str:
    return (f"the kernel's OOM killer killed it: its memory cgroup's oom_kill count went from "
            f"{oom[0]} to {oom[1]} as it ended")


def _cause_finding(e: Exit, after: Sequence[Exit],
                   failure: Optional[LaunchFailure]) -> Finding:
    if e.error is not None:
        how = f"with an error: {e.error}" + (f"; {_oom_said(e.oom)}" if e.oom else "")
    elif e.oom is not None:
        how = f"without a word in its log: {_oom_said(e.oom)}"
    else:
        how = ("without a word in its log: killed by a signal it cannot catch (SIGKILL, as "
               "the OOM killer sends)")
        if failure is not None and failure.host == e.rid.host:
            how += f"; its launcher's {failure.why}{_signal(failure.why)}"
    # Listed in rank order: peers aborted by one loss end in the same second, in no order
    # that means anything; the error shown is the first one's.
    shown = sorted(after, key=lambda a: a.rid.order())
    peers = (f"; {len(after)} peers failed after it: "
             f"{', '.join(a.rid.name() for a in shown[:4])}{', ...' if len(after) > 4 else ''}"
             f" ({after[0].error})") if after else ""
    ends = "" if e.error is not None else f"; its log ends: {e.tail[-1] if e.tail else '(empty)'}"
    return Finding("dead", Status.FAIL, (e.rid.host,),
                   f"{e.rid.name()} exited at {_clock(e.t)} {how}{peers}{ends}",
                   {"ranks": (e.rid,), "tail": e.tail, "error": e.error})


def _quiet_cause(quiet: Mapping[str, float], lost: Sequence[Exit],
                 addresses: Mapping[str, str]) -> Optional[Finding]:
    """The host gone quiet that its peers' ranks lost: the one gloo's timeouts name (by its
    address) where they name one, else every quiet host of the job; None where they name
    only hosts that answer (the peer lost is elsewhere)."""
    named = {addresses.get(m[1].rsplit(":", 1)[0], "?") for e in lost
             for m in GLOO_PEER.finditer(_tail_text(e))}
    hosts = sorted(h for h in quiet if h in named)
    if not hosts and named - {"?"}:
        return None
    hosts = hosts or sorted(quiet)
    shown = sorted(lost, key=lambda a: a.rid.order())
    said = " and ".join(f"{h} (no sample for {quiet[h]:.0f} s)" for h in hosts)
    by_gloo = " (gloo's timeouts name it)" if set(hosts) & named else ""
    return Finding(
        "dead", Status.FAIL, tuple(hosts),
        f"{said} went quiet as its peers lost it{by_gloo}: {len(lost)} peers failed "
        f"after: {', '.join(a.rid.name() for a in shown[:4])}{', ...' if len(lost) > 4 else ''}"
        f" ({lost[0].error}); its link or the host itself (cut off, hung, down); its own ranks "
        "could not be judged", {"ranks": (), "victims": tuple(e.rid for e in lost)})


def _died(e: Exit, live: Sequence[RankSeries], policy: WatchPolicy, unit: Unit,
          failure: Optional[LaunchFailure], state: WatchState) -> str:
    """Why a rank that exited died rather than finished ("" when it finished): its log ends
    in an error, the OOM killer took it, its host's launcher failed with it, or its peers ran
    on well after it (the ranks of a collective job end together; a PS server ends after its
    trainers; a PS trainer may end alone)."""
    rid, t, tail = e.rid, e.at, e.tail  # its peers' times on the controller's clock too
    last = tail[-1] if tail else ""
    error = _error(tail)
    if error is not None:
        return f"with an error: {error}" + (f"; {_oom_said(e.oom)}" if e.oom else "")
    if e.oom is not None:
        return f"without a word in its log: {_oom_said(e.oom)}"
    if failure is not None:
        return (f"and its launcher failed with it ({failure.why}{_signal(failure.why)}): "
                f"{LAUNCH_STOPPED}; its log ends: {last or '(empty)'}")
    if rid.role == "trainer":
        return ""
    # A job's ranks end together, but one may tear down seconds before the rest: a clean
    # exit is a death once its peers step on a sample after it, or still run a persistence
    # window later (blocked on it, as on a rank the OOM killer took).
    soon, late = 2 * policy.interval_s, max(2 * policy.interval_s, policy.persist_s)
    peers = [r for r in live if rid.role == "worker" or r.rid.role == "trainer"]
    stepped = [r for r in peers if state.at(r.rid.host, r.latest.t) - t >= soon
               and unit in r.last_growth
               and state.at(r.rid.host, r.last_growth[unit]) > t + policy.interval_s]
    after = stepped or [r for r in peers if state.at(r.rid.host, r.latest.t) - t >= late]
    if after:
        return (f"while its job runs on ({len(after)} ranks "
                f"{'step on' if stepped else f'run {late:g} s'} after it); "
                f"its log ends: {last or '(empty)'}")
    return ""


def _hang(job: JobSeries, live: Sequence[RankSeries], policy: WatchPolicy,
          state: WatchState) -> list[Finding]:
    """No progress on any rank for hang_s, and for 5 times the longest quiet spell the job
    had before (a job that logs once a minute is not hung after 30 quiet seconds)."""
    unit = job.unit()
    grown = [r for r in live if unit in r.last_growth]
    if not grown or not any(unit in r.longest_quiet for r in live):
        return []  # never seen moving: no pace to miss
    quiet = min(r.latest.t - r.last_growth[unit] for r in grown)
    before = max(r.longest_quiet.get(unit, 0.0) for r in live)
    if quiet < max(policy.hang_s, 5 * before):
        return []
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
    return [Finding("hang", Status.FAIL, hosts,
                    f"no progress on any of {len(live)} ranks for {quiet:.0f} s (its longest "
                    f"quiet spell before: {before:.1f} s; counted in {UNIT_WORDS[unit]})"
                    f"{cause}; ranks now: {waits}{gpus.in_hang(live, state)}"
                    f"{_stacks(live, state.stacks)}",
                    {"ranks": tuple(r.rid for r in stopped), "quiet_s": quiet,
                     "job": job.key})]


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


def _fallen(r: RankSeries, unit: Unit, policy: WatchPolicy) -> Optional[float]:
    """The rank's pace over the later half of the window as a share of its own early pace,
    where it stepped below (1 - margin) of that pace through both halves; None where it did
    not, or where its pace cannot be read (no early pace yet, no progress measure)."""
    h = _halves(r, unit, policy)
    early = r.early_rate.get(unit)
    if h is None or not early or h[0].progress is None or h[1].progress is None:
        return None
    now = (h[0].progress / h[0].dt, h[1].progress / h[1].dt)
    if not all(v < (1 - policy.margin) * early for v in now):
        return None
    return now[1] / early


def _halves(r: RankSeries, unit: Unit, policy: WatchPolicy) -> Optional[tuple[Span, Span]]:
    """The rank's change over each half of the persistence window ending at its last
    sample; None until the window is covered."""
    return r.halves(unit, policy.persist_s, policy.interval_s)


def _slower(group: Sequence[RankSeries], unit: Unit, policy: WatchPolicy,
            at_check: Mapping[str, AtCheck], job: JobSeries) -> list[Finding]:
    """Ranks whose progress rate is below (1 - margin) x their peers' median in both halves
    of the window: in a PS job in async mode, a trainer slow on its own."""
    halves = {r.rid: _halves(r, unit, policy) for r in group}
    rates: dict[RankId, tuple[float, float]] = {}
    counts: list[int] = []
    for rid, h in halves.items():
        if h is not None and h[0].progress is not None and h[1].progress is not None:
            rates[rid] = (h[0].progress / h[0].dt, h[1].progress / h[1].dt)
            counts += [h[0].progress, h[1].progress]
    if not counts or median(counts) < MIN_COUNT:
        return []  # too few steps (or step lines) in a half to tell paces apart
    out = []
    pools = [Pool(v[i] for v in rates.values()) for i in (0, 1)]
    for r in group:
        if r.rid not in rates or len(rates) < 2:
            continue
        own = rates[r.rid]
        ref = [pools[i].median_without(own[i]) or 0.0 for i in (0, 1)]
        if all(ref[i] > 0 and own[i] < (1 - policy.margin) * ref[i] for i in (0, 1)):
            score = own[1] / ref[1]
            sync = r.rid.role == "worker"
            h = halves[r.rid]
            assert h is not None
            out.append(Finding(
                "straggler", Status.FAIL if sync else Status.WARN, (r.rid.host,),
                f"{r.rid.name()} steps at {score:.2f} of its peers' median "
                f"({own[1]:.3g} vs {ref[1]:.3g} {UNIT_WORDS[unit]}/s for "
                f"{policy.persist_s:g} s)" + _why(r, h[1], at_check)
                + ("" if sync else "; in async mode it slows only itself"),
                {"ranks": (r.rid,), "score": score}))
    return out


def _busier(group: Sequence[RankSeries], unit: Unit, policy: WatchPolicy,
            at_check: Mapping[str, AtCheck], job: JobSeries, named: Sequence[RankId],
            ) -> list[Finding]:
    """The rank that keeps busy while its peers wait: its busy share at least BUSY_RATIO x
    theirs and BUSY_MORE above, in both halves of the window."""
    halves = {r.rid: _halves(r, unit, policy) for r in group}
    busy = {rid: (h[0].busy_s / h[0].dt, h[1].busy_s / h[1].dt)
            for rid, h in halves.items() if h is not None}
    out = []
    pools = [Pool(v[i] for v in busy.values()) for i in (0, 1)]
    early = {r.rid: (r.early[0].busy_s / r.early[0].dt, r.early[1].busy_s / r.early[1].dt)
             for r in group if r.early is not None}
    early_pools = [Pool(v[i] for v in early.values()) for i in (0, 1)]
    firsts = {r.rid: r.first_step.busy_s / r.first_step.dt for r in group
              if r.first_step is not None and r.first_step.dt > 0}
    first_pool = Pool(firsts.values())
    for r in group:
        if r.rid not in busy or r.rid in named or len(busy) < 2:
            continue
        own = busy[r.rid]
        ref = [pools[i].median_without(own[i]) or 0.0 for i in (0, 1)]
        if all(own[i] >= BUSY_RATIO * ref[i] + BUSY_MORE for i in (0, 1)):
            h = halves[r.rid]
            assert h is not None
            was = early.get(r.rid)
            peers_was = None if was is None or len(early) < 2 else [
                early_pools[i].median_without(was[i]) or 0.0 for i in (0, 1)]
            first = firsts.get(r.rid)
            peers_first = None if first is None else first_pool.median_without(first)
            if was is not None and peers_was is not None \
                    and _shape(r, h, was, peers_was, peers_first):
                out.append(Finding(
                    "shape", Status.PASS, (r.rid.host,),
                    f"{r.rid.name()} is busier than its peers ({own[1]:.2f} cores, they "
                    f"{ref[1]:.2f}) as it was from the start ({was[1]:.2f}, they "
                    f"{peers_was[1]:.2f}): the job's shape (a rank that also evaluates, logs "
                    "or checkpoints), not a straggler; named once it gets busier than that, "
                    "throttled or short of a CPU", {"ranks": ()}))
                continue
            out.append(Finding(
                "straggler", Status.FAIL, (r.rid.host,),
                f"{r.rid.name()} holds its {len(group) - 1} peers back: busy "
                f"{own[1]:.2f} cores while they wait ({ref[1]:.2f}) for "
                f"{policy.persist_s:g} s" + _why(r, h[1], at_check),
                {"ranks": (r.rid,), "busy": own[1], "peers_busy": ref[1]}))
    return out


def _shape(r: RankSeries, h: tuple[Span, Span], was: tuple[float, float],
           peers_was: Sequence[float], peers_first: Optional[float]) -> bool:
    """Whether a rank busier than its peers is so by the job's design: it was as much busier
    through its first interval and both halves of its first window, computing (not waiting
    for a CPU, nor throttled: a quota or other work there before the watch came is a fault
    all the same), and nothing of it changed since: it is not busier now than then, not
    throttled, and it waits for a CPU no longer than it did. A fault planted after the
    watch began leaves its first interval like its peers', and it is judged on its peers."""
    assert r.early is not None
    first = r.first_step
    if first is None or peers_first is None or first.dt <= 0:
        return False
    bar = [BUSY_RATIO * x + BUSY_MORE for x in (*peers_was, peers_first)]
    if not all(v >= b for v, b in zip((*was, first.busy_s / first.dt), bar)):
        return False
    if any(_throttled(x) or x.wait_s / x.dt >= RUNQUEUE_SHARE for x in r.early):
        return False
    now = h[1]
    busier = now.busy_s / now.dt >= max(was) + BUSY_MORE
    waits = now.wait_s / now.dt >= max(x.wait_s / x.dt for x in r.early) + BUSY_MORE
    return not (busier or _throttled(now) or waits)


def _server_holds_trainers(live: Sequence[RankSeries], unit: Unit, policy: WatchPolicy,
                           at_check: Mapping[str, AtCheck]) -> list[Finding]:
    """In a PS job, a server that holds every trainer: all trainers step below (1 - margin)
    of their own early pace through the window, alike, while a server is saturated (its
    quota throttles it, or it waits for a CPU). A trainer slow on its own is _slower's."""
    trainers = [r for r in live if r.rid.role == "trainer"]
    servers = [r for r in live if r.rid.role == "server"]
    if not trainers or not servers:
        return []
    paces = []
    for r in trainers:
        pace = _fallen(r, unit, policy)
        if pace is None:
            return []
        paces.append(pace)
    out = []
    for r in servers:
        h = _halves(r, unit, policy)
        if h is None or not all(_saturated(span) for span in h) or _saturated_by_design(r, h):
            continue
        out.append(Finding(
            "straggler", Status.FAIL, (r.rid.host,),
            f"{r.rid.name()} holds every trainer: the {len(trainers)} trainers step at "
            f"{min(paces):.2f}-{max(paces):.2f} of their pace at the start, alike, for "
            f"{policy.persist_s:g} s" + _why(r, h[1], at_check),
            {"ranks": (r.rid,), "paces": tuple(paces)}))
    return out


def _throttled(span: Span) -> bool:
    return bool(span.periods and span.throttled / span.periods >= THROTTLED_SHARE)


def _saturated(span: Span) -> bool:
    return _throttled(span) or span.wait_s / span.dt >= RUNQUEUE_SHARE


def _saturated_by_design(r: RankSeries, h: tuple[Span, Span]) -> bool:
    """Whether a server saturated now was so from its start, as much (on cores it shares
    from the start, under a quota it had then): the job's shape, not what slowed its
    trainers since. Not where it waits for a CPU longer now, or is throttled where it was not."""
    if r.early is None or not all(_saturated(x) for x in r.early):
        return False
    now = h[1]
    newly = _throttled(now) and not all(_throttled(x) for x in r.early)
    more = now.wait_s / now.dt >= max(x.wait_s / x.dt for x in r.early) + BUSY_MORE
    return not (newly or more)


def _why(r: RankSeries, span: Span, at_check: Mapping[str, AtCheck]) -> str:
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


def _progress_unread(live: Sequence[RankSeries]) -> list[Finding]:
    """Per host, its ranks whose progress the sampler cannot read: a stdout that is not a
    file (a pipe, a terminal) and no step hook, or a process it may not read (another
    user's). Their pace is compared with nobody's: said with the fix, never passed."""
    why: dict[str, list[str]] = {}
    for r in live:
        s = r.latest
        if s.hook_steps is not None or s.log_size is not None:
            continue
        if s.error and "Permission" in s.error:
            why.setdefault(r.rid.host, []).append(
                f"{r.rid.name()} cannot be read by the watch's user ({s.error[:120]}): run "
                "the watch as the job's user or as root")
        elif s.log_path is not None:
            why.setdefault(r.rid.host, []).append(
                f"{r.rid.name()} writes to {s.log_path}, not a file, and calls no step hook: "
                "call preflight.watch.step() once a step, or send its output to a file")
    return [Finding("progress", Status.WARN, (host,),
                    f"could not check progress on {host}: " + "; ".join(said)
                    + "; its pace is compared with nobody's", {"ranks": ()})
            for host, said in sorted(why.items())]


def _pace(job: JobSeries, live: Sequence[RankSeries], unit: Unit,
          policy: WatchPolicy) -> Finding:
    rates = []
    for r in live:
        span = r.span(r.latest.t - policy.persist_s, r.latest.t, unit)
        if span is not None and span.dt > 0 and span.progress is not None:
            rates.append(span.progress / span.dt)
    pace = f", {median(rates):.3g} {UNIT_WORDS[unit]}/s a rank" if rates else ""
    # Said as what was compared: the rules differ by the kind of job.
    if any(r.rid.role in ("trainer", "server") for r in live):
        compared = (f"no trainer below {1 - policy.margin:g} x its peers' median pace, no "
                    "server short of CPU")
    else:
        early = [r.early_rate[unit] for r in live if r.early_rate.get(unit)]
        compared = "none busy while its peers wait for it" + (
            f"; the job at {median(rates) / median(early):.2f} x its early pace"
            if rates and early else "")
    if not rates:
        compared += ("; no pace compared yet (fewer than two samples of their progress over "
                     "the window)")
    return Finding("progress", Status.PASS, tuple(job.hosts()),
                   f"{len(live)} ranks of {job.key} running{pace}; none stopped; {compared}",
                   {"ranks": ()})


def _signal(why: str) -> str:
    """What a launcher's exit status says of a signal: Paddle's launcher exits with its
    rank's return code, -N for a rank killed by signal N (256 - N as a status); a shell
    reports its own death by signal N as 128 + N."""
    m = re.fullmatch(r"exit (\d+)", why)
    code = int(m[1]) if m else 0
    if 256 - 64 <= code < 256:
        who, n = "a rank", 256 - code
    elif 128 < code < 128 + 64:
        who, n = "the launcher", code - 128
    else:
        return ""
    try:
        name = signal.Signals(n).name
    except ValueError:
        name = f"signal {n}"
    return f": {who} killed by {name}" + (", as the OOM killer kills" if n == 9 else "")


def _clock(t: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(t))
