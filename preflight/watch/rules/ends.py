"""How ranks end: stopped (SIGSTOP) or traced at once; dead where a rank exits in error or
while its peers run on; the cause of a chain of deaths named once, its victims folded under
it (the rank that failed first, the host gone quiet that its peers lost); a job stopped as a
whole blames nobody; a job whose ranks leave one by one as they finish is ending, and those
left are not compared. Exits on different hosts are ordered on the controller's clock."""

from __future__ import annotations

import re
import signal
from collections.abc import Mapping, Sequence
from typing import Optional

from preflight.common.paddlelog import COLLECTIVE_TIMEOUT, GLOO_PEER, LOST_PEER, TERMED
from preflight.model.findings import Finding, Status
from preflight.model.watch import Blame, LaunchFailure, WatchFinding, WatchPolicy
from preflight.watch.rules.exits import (
    LAUNCH_STOPPED,
    STOP_WINDOW_INTERVALS,
    Exit,
    error_line_of,
    exit_causes,
    stop_window_s,
    tail_text,
    whole_stop,
)
from preflight.watch.rules.phases import WRITE_BPS, write_rate
from preflight.watch.rules.shared import clock_of
from preflight.watch.series import (
    JobSeries,
    RankSeries,
    Unit,
    WatchState,
)

STOPPED = ("T",)  # SIGSTOP, a suspended shell: nothing moves it on but a SIGCONT


# Held by a tracer (ptrace: a debugger, strace, a py-spy dump): someone is looking at it,
# which is no fault of its host; said, never failed or acted on.
TRACED = "t"


def suspended(job: JobSeries, live: Sequence[RankSeries], policy: WatchPolicy,
              state: WatchState) -> Optional[Finding]:
    """Every rank of the job stopped (state T), within two intervals of each other: the job
    suspended as a whole (a scheduler's suspend, `scontrol suspend`; a SIGSTOP to all of it),
    no rank holding the others. Said once, blaming nobody, never acted on."""
    if len(live) < 2 or not all(r.latest.state in STOPPED for r in live):
        return None
    since = [state.at(r.rid.host, r.state_since[1]) for r in live]
    if max(since) - min(since) > STOP_WINDOW_INTERVALS * policy.interval_s:
        return None  # stopped one after another: each is its own (the first holds the rest)
    return WatchFinding(
        "suspended", Status.WARN, tuple(job.hosts()),
        f"the job {job.key} is suspended as a whole: its {len(live)} ranks stopped (state T) "
        f"together at {clock_of(min(since))} (a scheduler's suspend, or a SIGSTOP to all of "
        "it): no rank holds the others, nobody is blamed, nothing is acted on; it steps again "
        "once resumed", {"since": min(since)}, blame=Blame("job-stopped", job=job.key))


def stopped_or_dead(job: JobSeries, present: Sequence[RankSeries],
                    live: Sequence[RankSeries], policy: WatchPolicy,
                    state: WatchState, quiet: Mapping[str, float],
                    addresses: Mapping[str, str]) -> list[Finding]:
    failure = state.launch_failure
    whole = suspended(job, live, policy, state)
    if whole is not None:
        return [whole]
    out: list[Finding] = []
    others = len(live) - 1
    exits: list[Exit] = []
    for r in present:
        s = r.latest
        if s.state in STOPPED:
            out.append(WatchFinding(
                "stopped", Status.FAIL, (r.rid.host,),
                f"{r.rid.name()} is stopped (state {s.state}: a SIGSTOP or a suspended shell) "
                f"since {clock_of(state.at(r.rid.host, r.state_since[1]))}"
                + (f"; its {others} peers wait on it" if others else ""),
                {"since": r.state_since[1]}, blame=Blame("stopped", ranks=(r.rid,))))
        elif s.state == TRACED:
            out.append(WatchFinding(
                "traced", Status.WARN, (r.rid.host,),
                f"{r.rid.name()} is held by a tracer (state t: a debugger, strace or py-spy "
                f"attached) since {clock_of(state.at(r.rid.host, r.state_since[1]))}"
                + (f"; its {others} peers wait on it while it is" if others else "")
                + ": someone is looking at it, no fault of its host; not acted on",
                {"since": r.state_since[1]}, blame=Blame("traced", ranks=(r.rid,))))
        elif s.state == "Z":  # exited, not yet reaped: judged as a rank gone
            exits.append(Exit(r.state_since[1], r.rid, s.log_tail, _oom_rise(r),
                              state.at(r.rid.host, r.state_since[1]), _unread(r)))
    exits += [Exit(t, rid, tail, job.oom_killed.get(rid), state.at(rid.host, t),
                   _unread(job.ranks.get(rid)))
              for rid, (t, tail) in job.gone.items()]
    exits.sort(key=lambda e: e.at)
    if failure is None and not live and whole_stop(exits, policy):
        span = exits[-1].at - exits[0].at
        return out + [WatchFinding(
            "ended", Status.WARN, tuple(job.hosts()),
            f"the job {job.key} was stopped as a whole: its {len(exits)} ranks ended by a "
            f"signal to stop within {span:.0f} s of each other, none failing first (a Ctrl-C "
            "of its launchers or of preflight launch, a scancel): no rank or host to blame",
            blame=Blame("job-stopped", job=job.key))]
    now = max((state.at(r.rid.host, r.latest.t) for r in present), default=0.0)
    if failure is None and live and any(
            TERMED.search(tail_text(e)) and now - e.at < stop_window_s(policy)
            for e in exits):
        # A rank stopped by a signal while its peers run: a stop of the whole job (a Ctrl-C,
        # scancel) ends every rank within seconds; until then no end is judged, neither a
        # cause nor a death (a rank KILLed after its TERM looks like one that died first).
        return out
    causes, after = exit_causes(exits, policy)
    timed_out = None if causes or failure is not None else own_timeout(job, exits, policy)
    if timed_out is not None:
        return out + [timed_out]
    out += [_cause_finding(e, after, failure) for e in causes]
    explained = {e.rid for e in causes} | {e.rid for e in after}
    lost = [e for e in exits if e.rid not in explained and e.error is not None
            and LOST_PEER.search(tail_text(e))]
    # The hosts gone quiet now, and those that went quiet as their peers died and answer
    # again (a link mended, a host back): their own ranks' ends, read once they answer, say
    # they lost their peers too, and that is no evidence against the peers. One whose ranks
    # run on once it answers was not the peer they lost.
    running = {r.rid.host for r in live}
    silent = {**{h: s for h, s in job.lost_hosts.items() if h not in quiet and h not in running},
              **quiet}
    cause = _quiet_cause(silent, lost, addresses, quiet) if lost and silent and not causes \
        else None
    if cause is not None:
        # Ranks died for a lost peer, none of theirs ended first, and a host of the job went
        # quiet: the peer they lost is there (its link cut, the host hung or down), and
        # they are its victims, not culprits.
        out.append(cause)
        explained |= {e.rid for e in lost}
        for h in cause.hosts:
            job.lost_hosts[h] = max(silent[h], job.lost_hosts.get(h, 0.0))
    # A rank that died for a lost peer whose loss is not seen yet, while ranks of the job
    # still seem to run: the peer's host may say so only in its next sample (each host's
    # sampler keeps its own beat), so it is not named before that. Once every rank is seen
    # ended, every end is in.
    newest = max((state.at(h, s[-1].t) for h, s in state.hosts.items() if s), default=0.0)
    young = {e.rid for e in lost if live
             and newest - e.at < STOP_WINDOW_INTERVALS * policy.interval_s}
    for e in exits:
        if e.rid in explained or e.rid in young:
            continue
        why = _died(e, live, policy, job.unit(),
                    failure if failure is not None and failure.host == e.rid.host else None,
                    state)
        if why:
            out.append(WatchFinding("dead", Status.FAIL, (e.rid.host,),
                                    f"{e.rid.name()} exited at {clock_of(e.at)} {why}",
                                    {"tail": e.tail}, blame=_exit_blame(e)))
    if failure is not None and not live and failure.host in job.launcher_hosts() \
            and not any(f.check == "dead" for f in out):
        # The job ended, its launch failed, and no rank's end says why: its ranks there were
        # never seen to exit (or never seen), or they ended as if the job had.
        out.append(WatchFinding("dead", Status.FAIL, (failure.host,),
                                f"{failure.host}'s launcher failed ({failure.why}) at "
                                f"{clock_of(failure.at)}: {LAUNCH_STOPPED}",
                                blame=Blame("launch", job=job.key)))
    return out


def own_timeout(job: JobSeries, exits: Sequence[Exit], policy: WatchPolicy
                ) -> Optional[Finding]:
    """The job ended by its own collective timeout during a phase: its ranks aborted when a
    collective waited past its timeout (gloo's 30 s) for a rank busy in a phase of the job's
    own (a checkpoint, an evaluation) that began at least that long before, and none failed
    on its own. Said with the rank, what it was in and for how long, and the timeout: no host
    is to blame; the phase outran what the job's collectives wait."""
    waited = [int(m.group(1)) / 1000.0 for e in exits
              if (m := COLLECTIVE_TIMEOUT.search(tail_text(e)))]
    if not waited or any(e.error is not None and not LOST_PEER.search(tail_text(e))
                         for e in exits):
        return None
    timeout, first = max(waited), exits[0].at
    spells = [(rid, since, end) for rid, (since, end) in job.phases.items()] + [
        (rid, since, since + length) for rid, runs in job.phase_spells.items()
        for since, length in runs]
    # A phase open as the first rank ended (give or take a judgement), begun before the
    # collective that waited for it started to wait.
    inside = [(rid, since, end) for rid, since, end in spells
              if since <= first - timeout + policy.interval_s
              and end >= first - policy.persist_s - policy.interval_s]
    if not inside:
        return None
    rid, since, end = max(inside, key=lambda x: x[2] - x[1])
    return WatchFinding(
        "ended", Status.WARN, tuple(job.hosts()),
        f"the job {job.key} ended by its own collective timeout: its ranks aborted when a "
        f"collective waited {timeout:g} s (gloo's timeout) for {rid.name()}, in a phase of "
        f"the job's own since {clock_of(since)} ({max(end, first) - since:.0f} s by the first "
        "end): no host to blame; a phase longer than the collective timeout ends the job "
        "(save asynchronously, or on every rank, or raise the timeout)",
        {"timeout_s": timeout, "phase_s": max(end, first) - since},
        blame=Blame("job-stopped", job=job.key))


def ending(job: JobSeries, present: Sequence[RankSeries], live: Sequence[RankSeries],
           found: Sequence[Finding], state: WatchState) -> Optional[Finding]:
    """Some of the job's ranks ended, none in error and nobody named for it, while the rest
    still run: the job is ending (ranks leave one by one as they finish, a rank 0 saving last).
    Those left are not compared: their pace and CPU while they finish, with peers already
    gone, are no straggler's. A hang among them is still said (find_hang judges first)."""
    ended = [r.rid for r in present if r.latest.state == "Z"] + list(job.gone)
    if not ended or not live or any(f.status is not Status.PASS for f in found):
        return None
    tails = [r.latest.log_tail for r in present if r.latest.state == "Z"] + \
        [tail for _, tail in job.gone.values()]
    if any(error_line_of(t) is not None for t in tails):
        return None  # an end in error is the ends rules' to judge
    since = min([state.at(rid.host, t) for rid, (t, _) in job.gone.items()] +
                [state.at(r.rid.host, r.state_since[1]) for r in present
                 if r.latest.state == "Z"])
    return WatchFinding(
        "ending", Status.PASS, tuple(job.hosts()),
        f"{len(ended)} of {len(job.ranks)} ranks of {job.key} ended since {clock_of(since)}, "
        f"none in error; the {len(live)} left are finishing: their pace and CPU are not "
        "compared while the job ends")


def _oom_rise(r: RankSeries) -> Optional[tuple[int, int]]:
    """Its memory cgroup's OOM kills, before and after, where they rose over its samples."""
    counts = [s.oom_kills for s in r.samples if s.oom_kills is not None]
    return (counts[0], counts[-1]) if counts and counts[-1] > counts[0] else None


def _oom_said(oom: tuple[int, int]) -> str:
    return (f"the kernel's OOM killer killed it: its memory cgroup's oom_kill count went from "
            f"{oom[0]} to {oom[1]} as it ended")


def _cause_finding(e: Exit, after: Sequence[Exit],
                   failure: Optional[LaunchFailure]) -> Finding:
    if e.unread is not None and e.error is None and e.oom is None:
        how = (f"first, its output going to {e.unread}, which the watch cannot read: how it "
               "ended is not known (its host, or its own code)")
    elif e.error is not None:
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
    said = next((a.error for a in after if a.error), None)
    peers = (f"; {len(after)} peers failed after it: {_names(shown)}"
             + (f" ({said})" if said else "")) if after else ""
    ends = "" if e.error is not None or e.unread is not None else \
        f"; its log ends: {e.tail[-1] if e.tail else '(empty)'}"
    return WatchFinding("dead", Status.FAIL, (e.rid.host,),
                        f"{e.rid.name()} exited at {clock_of(e.at)} {how}{peers}{ends}",
                        {"tail": e.tail}, blame=_exit_blame(e))


def _exit_blame(e: Exit) -> Blame:
    unknown = e.unread is not None and e.error is None and e.oom is None
    return Blame("exit-unread" if unknown else "exit", ranks=(e.rid,), error=e.error)


def _unread(r: Optional[RankSeries]) -> Optional[str]:
    """Where the rank's output went, where the watch could not read it (a step hook counts
    its steps, but says nothing of how it ended). One read as a file in any sample was: a
    rank sampled as it dies (a zombie has no open files) shows no output in its last."""
    if r is None or not r.samples or any(s.log_size is not None for s in r.samples):
        return None
    return r.latest.log_path or "output the watch may not read"


def _quiet_cause(silent: Mapping[str, float], lost: Sequence[Exit],
                 addresses: Mapping[str, str], quiet: Mapping[str, float]
                 ) -> Optional[Finding]:
    """The host gone silent that its peers' ranks lost: the one gloo's timeouts name (by its
    address) where they name one, else every silent host of the job; None where they name
    only hosts that answer (the peer lost is elsewhere). silent holds the hosts quiet now
    (quiet) and those that went quiet as their peers died and answer again."""
    named = {addresses.get(m[1].rsplit(":", 1)[0], "?") for e in lost
             for m in GLOO_PEER.finditer(tail_text(e))}
    hosts = sorted(h for h in silent if h in named)
    if not hosts and named - {"?"}:
        return None
    hosts = hosts or sorted(silent)
    peers = sorted((e for e in lost if e.rid.host not in hosts), key=lambda a: a.rid.order())
    own = sorted((e for e in lost if e.rid.host in hosts), key=lambda a: a.rid.order())
    if not peers:
        return None  # only its own ranks lost a peer: nothing says the peer was not theirs
    said = " and ".join(f"{h} (no sample for {silent[h]:.0f} s)" if h in quiet else
                        f"{h} (silent for {silent[h]:.0f} s, answering again)" for h in hosts)
    by_gloo = " (gloo's timeouts name it)" if set(hosts) & named else ""
    if any(h in quiet for h in hosts):
        theirs = "its own ranks could not be judged"
    elif own:
        theirs = f"its own ranks ended too, seen once it answered: {_names(own)}"
    else:
        theirs = "its own ranks were not seen to end"
    return WatchFinding(
        "dead", Status.FAIL, tuple(hosts),
        f"{said} went quiet as its peers lost it{by_gloo}: {len(peers)} peers failed "
        f"after: {_names(peers)} ({peers[0].error}); its link or the host itself (cut off, "
        f"hung, down); {theirs}",
        {"victims": [e.rid.doc() for e in peers + own]}, blame=Blame("lost-host"))


def _names(exits: Sequence[Exit]) -> str:
    """The first four ranks' names, ", ..." after them where there are more."""
    return ", ".join(e.rid.name() for e in exits[:4]) + (", ..." if len(exits) > 4 else "")


def _died(e: Exit, live: Sequence[RankSeries], policy: WatchPolicy, unit: Unit,
          failure: Optional[LaunchFailure], state: WatchState) -> str:
    """Why a rank that exited died rather than finished ("" when it finished): its log ends
    in an error, the OOM killer took it, its host's launcher failed with it, or its peers ran
    on well after it (the ranks of a collective job end together; a PS server ends after its
    trainers; a PS trainer may end alone)."""
    rid, t, tail = e.rid, e.at, e.tail  # its peers' times on the controller's clock too
    last = tail[-1] if tail else ""
    error = error_line_of(tail)
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
    # A peer that writes files since (a rank 0 saving the final model as the others leave)
    # is finishing, not blocked on it.
    after = stepped or [r for r in peers if state.at(r.rid.host, r.latest.t) - t >= late
                        and (write_rate(r, _on_host_of(r, t, state)) or 0.0) < WRITE_BPS]
    if after:
        return (f"while its job runs on ({len(after)} ranks "
                f"{'step on' if stepped else f'run {late:g} s'} after it); "
                f"its log ends: {last or '(empty)'}")
    return ""


def _on_host_of(r: RankSeries, at: float, state: WatchState) -> float:
    """A time on the controller's clock, on r's host's clock."""
    return r.latest.t - (state.at(r.rid.host, r.latest.t) - at)


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
