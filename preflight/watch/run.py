"""A watch: one sampler a host over the Remote a transport hands out, its lines read as they
come, judged once an interval, shown and logged; every sampler stopped at the end, also on
Ctrl-C. Bounded throughout: a host whose sampler stalls or ends is a finding, not a wait."""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Optional, TextIO

from preflight.common.remote import Remote, Started, in_parallel
from preflight.model.findings import BLOCKING, Finding, Status
from preflight.model.watch import LaunchFailure, RankId, SchedulerEnd, WatchPolicy, blame_of
from preflight.watch import sampler_text, scheduler, stacks, timeshare
from preflight.watch.judge import AtCheck, judge, stale_after
from preflight.watch.metrics import Metrics
from preflight.watch.record import Record
from preflight.watch.samples import BadSample, HostStream
from preflight.watch.series import WatchState
from preflight.watch.view import Live

POLL_S = 0.25
SAMPLER_DAY_S = 86400.0
MAX_RESTARTS = 1000
# A sampler that ended in error (its connection dropped, its host rebooting) is started again
# after a wait that doubles with each failure in a row, up to this long.
RECONNECT_MAX_S = 60.0
EXIT_HEALTHY, EXIT_FINDINGS, EXIT_INTERRUPTED = 0, 1, 130


@dataclass(frozen=True)
class WatchOptions:
    policy: WatchPolicy = WatchPolicy()
    sampler: sampler_text.SamplerOptions = sampler_text.SamplerOptions()
    duration_s: Optional[float] = None  # --for; None: until interrupted
    once: bool = False  # one judgement as soon as the window is covered, then exit
    at_check: Mapping[str, AtCheck] = field(default_factory=dict)
    metrics_port: Optional[int] = None  # serve OpenMetrics on this port
    metrics_address: str = "127.0.0.1"
    metrics_textfile: Optional[str] = None  # write them here after each judgement
    addresses: Mapping[str, str] = field(default_factory=dict)  # a peer's address -> host
    # --act: called with the findings of each judgement; what it returns, when not None
    # (the job launched again elsewhere), ends this watch with it (relaunched).
    act: Optional[Callable[[Sequence[Finding]], Optional[object]]] = None
    # What the launch that started the job says of its end (read at each judgement): the
    # host whose launcher failed, if one did.
    launch_failure: Optional[Callable[[], Optional[LaunchFailure]]] = None
    # What the scheduler says of the job the samplers run in, once it no longer runs it
    # (asked at each judgement); None while it runs, or where no scheduler holds the job.
    scheduler_end: Optional[Callable[[], Optional[SchedulerEnd]]] = None

    def length(self) -> Optional[float]:
        if self.once:  # the persistence window and a sample on either side of it
            return self.policy.persist_s + 2.5 * self.policy.interval_s
        return self.duration_s


@dataclass
class WatchResult:
    findings: list[Finding]
    interrupted: bool = False
    cpu_s: float = 0.0  # this process's CPU while the samplers ran (what watching costs)
    samples: int = 0  # lines read from all hosts
    relaunched: Optional[object] = None  # what act returned: the job runs again elsewhere

    @property
    def code(self) -> int:
        if self.interrupted:
            return EXIT_INTERRUPTED
        return EXIT_FINDINGS if any(f.status is not Status.PASS for f in self.findings) \
            else EXIT_HEALTHY


# The most one line of a sampler may hold: a sample of a host of hundreds of ranks, each with
# its log's tail, is a few hundred KiB. Past it the line is no sample (a sampler gone wrong,
# or a host sending what it likes): dropped to its end, said as a line skipped, never kept.
LINE_MAX = 4 << 20


class _Host:
    """One host's sampler: its channel, the part of a line not yet ended, its stream."""

    def __init__(self, name: str, remote: Remote, command: str) -> None:
        self.name, self.remote, self.command = name, remote, command
        self.started: Started = remote.start(command)
        self.stream = HostStream(name)
        self.partial = bytearray()
        self.dropping = False  # the rest of a line past LINE_MAX is dropped to its end
        self.ended: Optional[str] = None
        self.restarts = 0
        self.bad = 0  # lines that did not read as samples, skipped
        self.bad_last = ""  # why the last of them did not
        self.failures = 0  # its samplers that ended in error in a row
        self.retry_at: Optional[float] = None  # when to start it again (the watch's clock)
        self.interval_s = 5.0  # the watch's, as its backoff is counted in them

    def failed(self, why: str, now: float, interval_s: float) -> None:
        """Its sampler ended in error: said, and started again after a backoff (twice the
        interval, doubled with each failure in a row)."""
        self.failures += 1
        self.interval_s = interval_s
        wait = min(RECONNECT_MAX_S, interval_s * 2 ** self.failures)
        self.retry_at = now + wait
        self.ended = f"{why}; starting its sampler again in {wait:.3g} s (try {self.failures})"

    def reconnect(self, now: float) -> None:
        if self.retry_at is None or now < self.retry_at:
            return
        self.retry_at = None
        try:
            self.started.close()
            self.started, self.partial = self.remote.start(self.command), bytearray()
            self.dropping = False
            self.ended = None
        except Exception as e:  # still gone: the next try waits longer
            self.failed(f"could not start its sampler again: {type(e).__name__}: {e}"[:300],
                        now, self.interval_s)

    def lines(self) -> list[str]:
        """The lines ended since the last read. The part not ended is kept by appending to
        it (copied whole at each read, a line that never ends cost its length squared), up
        to LINE_MAX."""
        data = self.started.take()
        if self.dropping:
            end = data.find(b"\n")
            if end < 0:
                return []
            data, self.dropping = data[end + 1:], False
        self.partial += data
        if b"\n" not in data:
            self._bound()
            return []
        *done, rest = bytes(self.partial).split(b"\n")
        self.partial = bytearray(rest)
        self._bound()
        out = []
        for ln in done:
            if len(ln) > LINE_MAX:
                self._skipped(len(ln))
            elif ln.strip():
                out.append(ln.decode("utf-8", "replace"))
        return out

    def _bound(self) -> None:
        if len(self.partial) > LINE_MAX:
            self._skipped(len(self.partial))
            self.partial, self.dropping = bytearray(), True

    def _skipped(self, size: int) -> None:
        self.bad += 1
        self.bad_last = f"a line of over {LINE_MAX:,} bytes ({size:,} so far), not a sample"


def watch(remotes: Mapping[str, Remote], pythons: Mapping[str, str], opts: WatchOptions,
          record: Optional[Record], out: TextIO, width: int = 0,
          unreached: Optional[Mapping[str, str]] = None) -> WatchResult:
    """Watches the job on the hosts until the time is up (or interrupted); returns the last
    findings, the hosts that could not be reached or sampled among them."""
    policy = opts.policy
    state = WatchState.for_policy(policy.interval_s, policy.persist_s)
    lost = {h: f"could not be reached: {why}" for h, why in (unreached or {}).items()}
    hosts: dict[str, _Host] = {}
    live = Live(out, width, timeshare.WINDOW_S)
    length = opts.length()
    sampler = opts.sampler
    # The samplers end by themselves soon after the watch: a bounded one's with it, an
    # endless one's each day (started again then).
    sampler = sampler_text.SamplerOptions(
        sampler.interval_s, SAMPLER_DAY_S if length is None else length + 30, sampler.token,
        sampler.step_pattern)
    findings: list[Finding] = []
    relaunched: Optional[object] = None
    interrupted = False
    samples, cpu = 0, 0.0
    ended: Optional[SchedulerEnd] = None
    server = None
    metrics = Metrics() if opts.metrics_port is not None or opts.metrics_textfile else None
    try:
        if metrics is not None and opts.metrics_port is not None:
            server = metrics.serve(opts.metrics_address, opts.metrics_port)
        for name, remote in remotes.items():
            try:
                hosts[name] = _Host(name, remote, sampler_text.command(
                    pythons.get(name, "python3"), sampler))
            except Exception as e:  # a channel refused: this host cannot be watched
                lost[name] = f"could not start its sampler: {type(e).__name__}: {e}"[:300]
        # The watch's own time: the wall clock at its start, counted on since by the
        # monotonic clock (a step of this machine's clock moves nothing). Samples are placed
        # on it as they arrive and every time a message says is read off it: a time of day,
        # as the results log's are.
        wall0 = time.time() - time.monotonic()

        def clock() -> float:
            return time.monotonic() + wall0

        start = clock()
        cpu0 = sum(os.times()[:2])
        end = None if length is None else start + length
        next_judge = start + policy.interval_s
        poll = min(1.0, max(POLL_S, policy.interval_s / 5))  # a line a host an interval
        while end is None or clock() < end:
            now = clock()
            judging = now >= next_judge
            for h in hosts.values():
                h.reconnect(now)
                if h.ended is None:
                    samples += _read(h, state, record, now, check_exit=judging,
                                     interval_s=policy.interval_s)
            if judging:
                next_judge = now + policy.interval_s
                ended = opts.scheduler_end() if opts.scheduler_end is not None else None
                findings = _findings(state, policy, opts, lost, hosts, now, start, ended=ended)
                if ended is None and _take_stacks(state, findings, hosts):
                    findings = _findings(state, policy, opts, lost, hosts, now, start)
                new, cleared = live.update(findings)
                if record is not None:
                    record.findings("finding", new)
                    record.findings("cleared", cleared)
                    _record_time(record, state, now - timeshare.SETTLE_HANGS * policy.hang_s)
                    record.named = {h for f in findings if f.status in (Status.FAIL, Status.WARN)
                                    for h in f.hosts}
                if metrics is not None:
                    metrics.update(state, findings, policy.persist_s / 2, now)
                    if opts.metrics_textfile:
                        metrics.write(opts.metrics_textfile)
                if opts.act is not None:
                    relaunched = opts.act(findings)
                    if relaunched is not None:
                        break  # the job this watch followed was stopped: follow the new one
                if ended is not None and ended.final:
                    break  # its samplers ended with it: there is nothing left to watch
            time.sleep(poll)
        if relaunched is None and not (ended is not None and ended.final):
            findings = _findings(state, policy, opts, lost, hosts, clock(), start,
                                 final=True)
        cpu = sum(os.times()[:2]) - cpu0
        if record is not None:
            _record_time(record, state, None)
    except KeyboardInterrupt:
        interrupted = True
    finally:
        for h in hosts.values():
            h.started.close()
        if server is not None:
            server.shutdown()
    return WatchResult(findings, interrupted, cpu, samples, relaunched)


def _read(h: _Host, state: WatchState, record: Optional[Record], now: float,
          check_exit: bool, interval_s: float = 5.0) -> int:
    """Reads what the host's sampler printed; returns the samples read. Whether it has
    ended is asked once an interval (check_exit), not at every read."""
    try:
        lines = h.lines()
    except Exception as e:
        h.failed(f"its channel failed: {type(e).__name__}: {e}"[:300], now, interval_s)
        return 0
    read = 0
    for ln in lines:
        try:
            tick = h.stream.feed(ln)
        except BadSample as e:  # a gap in this host's samples, said; the next line counts
            h.bad, h.bad_last = h.bad + 1, str(e)
            continue
        state.add(tick, now)
        read += 1
        h.failures = 0  # it answers again
        if record is not None:
            record.sample(h.name, tick.line, tick)
    if not check_exit:
        return read
    done = h.started.wait(0)
    if done.exit == 0 and h.restarts < MAX_RESTARTS:  # its lifetime was up: a new one
        h.started.close()
        h.restarts += 1
        h.started, h.partial, h.dropping = h.remote.start(h.command), bytearray(), False
    elif done.exit is not None:
        h.failed(f"its sampler ended (exit {done.exit}: {done.tail()})", now, interval_s)
    return read


def _record_time(record: Record, state: WatchState, before: Optional[float]) -> None:
    """Each job's spells (what its time went to) that no later judgement changes, to the
    results log as they settle (a watch killed keeps them); every one at the end (None)."""
    for job in state.jobs.values():
        spells = job.ledger.take_rest() if before is None else job.ledger.take_closed(before)
        for s in spells:
            record.event("time", job=job.key, spent=s.kind, start=round(s.start, 3),
                         end=round(s.end, 3))


def _take_stacks(state: WatchState, findings: Sequence[Finding],
                 hosts: Mapping[str, _Host]) -> bool:
    """Takes the stacks of every rank of a job that has just been found hung (once a job);
    returns whether any were taken."""
    hung = {str(blame_of(f).job) for f in findings if f.check == "hang" and blame_of(f).job}
    todo = [state.jobs[k] for k in hung - state.stacks_of if k in state.jobs]
    if not todo:
        return False
    by_host: dict[str, list[RankId]] = {}
    for job in todo:
        state.stacks_of.add(job.key)
        for r in job.live():
            by_host.setdefault(r.rid.host, []).append(r.rid)

    def one(host: str, rids: list[RankId]) -> None:
        limit = stacks.SPY_TIMEOUT_S * len(rids) + 5.0
        try:
            done = hosts[host].remote.run(stacks.command([r.pid for r in rids]), limit)
            frames = stacks.parse(done.stdout)
        except Exception as e:  # the host's own problem: its stacks are not to be had
            frames = {r.pid: f"no stack: {type(e).__name__}: {e}"[:160] for r in rids}
        for r in rids:
            state.stacks[r] = frames.get(r.pid, "no stack: py-spy said nothing of it")

    in_parallel([functools.partial(one, h, rids) for h, rids in by_host.items()
                 if h in hosts], stacks.SPY_TIMEOUT_S * 4 + 10.0, "stacks")
    return True


def _findings(state: WatchState, policy: WatchPolicy, opts: WatchOptions,
              lost: Mapping[str, str], hosts: Mapping[str, _Host], now: float, start: float,
              final: bool = False, ended: Optional[SchedulerEnd] = None) -> list[Finding]:
    if ended is not None:  # the samplers end with the job: their silence is its end
        found = judge(state, policy, now, opts.at_check, opts.addresses, ended.final)
        return scheduler.findings(ended, found, list(hosts), _unwatched(lost))
    gone = {**lost, **{n: h.ended for n, h in hosts.items() if h.ended is not None}}
    if final or now - start > stale_after(policy):  # at the end, silence is all there is
        gone.update({n: f"no sample in {now - start:.0f} s since the watch began (its "
                        "sampler did not start: its python3?)"
                     for n in hosts if n not in state.last_tick and n not in gone})
    out = _unwatched(gone)
    out += [Finding("watch", Status.WARN, (n,), f"{n}: {h.bad} line(s) of its sampler did not "
                    f"read as a sample and were skipped; the last: {h.bad_last}",
                    {"skipped": h.bad})
            for n, h in sorted(hosts.items()) if h.bad and n not in gone]
    if opts.launch_failure is not None:
        state.launch_failure = opts.launch_failure()
    found = judge(state, policy, now, opts.at_check, opts.addresses, final)
    out += [f for f in found if not (f.check == "watch" and set(f.hosts) <= set(gone))]
    return sorted(out, key=lambda f: (BLOCKING.index(f.status) if f.status in BLOCKING
                                      else len(BLOCKING) + (f.status is Status.PASS)))


def _unwatched(gone: Mapping[str, str]) -> list[Finding]:
    """A host that could not be watched, each with why."""
    return [Finding("watch", Status.COULD_NOT_CHECK, (n,), f"{n}: {why}")
            for n, why in sorted(gone.items())]
