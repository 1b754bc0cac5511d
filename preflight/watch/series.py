"""Samples kept over time: each rank's recent samples and when it last made progress, grouped
by job (the launchers of one job on every host), and each host's. Only what the judgement
needs is kept: a window of samples, and a few running figures of the whole watch."""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable, Sequence
from typing import Literal, NamedTuple, Optional

from preflight.model.watch import HostSample, LaunchFailure, RankId, RankSample
from preflight.watch.attempts import launchers_gone, restarted
from preflight.watch.baseline import Paces, Shapes
from preflight.watch.clocks import HostClocks
from preflight.watch.linkmemory import LinkMemory
from preflight.watch.samples import Launcher, Tick
from preflight.watch.timeshare import Ledger

# How a job's progress is counted: the step hook where its ranks call it, else the step
# lines of their logs, else the bytes of their logs (any output at all).
Unit = Literal["hook", "steps", "bytes"]
UNIT_WORDS = {"hook": "steps", "steps": "step lines", "bytes": "log bytes"}
UNITS: tuple[Unit, ...] = ("hook", "steps", "bytes")
WARMUP_AT_MOST = 2  # early windows after which a rank that shows no step is taken as warm


def progress(s: RankSample, unit: Unit) -> Optional[int]:
    return {"hook": s.hook_steps, "steps": s.log_steps, "bytes": s.log_size}[unit]


class Span(NamedTuple):
    """What changed for a rank between two of its samples (a tuple: half a dataclass's cost)."""

    t0: float
    t1: float
    progress: Optional[int]
    busy_s: float  # on a CPU or waiting for one
    wait_s: float  # waiting for one
    periods: int
    throttled: int

    @property
    def dt(self) -> float:
        return self.t1 - self.t0


class RankSeries:
    def __init__(self, rid: RankId, keep: int) -> None:
        self.rid = rid
        self.samples: deque[RankSample] = deque(maxlen=keep)
        self.first_t: Optional[float] = None
        # Per unit: when its count last grew, and the longest spell between two growths.
        self.last_growth: dict[Unit, float] = {}
        self.longest_quiet: dict[Unit, float] = {}
        self.state_since: tuple[str, float] = ("?", 0.0)  # its state, since when
        # Per unit: its rate over its first window (its pace before anything changed).
        self.first: dict[Unit, tuple[float, int]] = {}  # unit -> (t, count) first seen
        self.early_rate: dict[Unit, float] = {}
        self.early_after_s = 15.0  # the window that early_rate spans (the policy's persist)
        # Its first window's two halves (what changed over each; followed: watch/baseline.py)
        # and its first interval alone: how busy it is by the job's design, before anything
        # changed; the samples that bound them until then.
        self.early: Optional[tuple[Span, Span]] = None
        self.first_step: Optional[Span] = None
        self._marks: list[RankSample] = []
        # When its warm-up ended: the first sample at which it stepped (its step hook or its
        # step lines grew), or WARMUP_AT_MOST early windows after its first sample where it
        # shows no steps to count (a PS server, which never steps: its first sample). Its
        # early figures are learned from there: a job watched from its launch spends its
        # first seconds importing, not stepping, and its figures then are no pace or shape
        # of the job.
        self.warm: Optional[float] = None
        self._first_from: Optional[RankSample] = None
        # halves() of the samples as they are: every rule of a judgement reads them.
        self._halves: tuple[tuple[object, ...], Optional[tuple[Span, Span]]] = ((), None)

    def add(self, s: RankSample) -> None:
        prev = self.samples[-1] if self.samples else None
        if self.first_t is None:
            self.first_t = s.t
        if self.warm is None:
            if _stepped(prev, s) and prev is not None:
                # It stepped in the interval before s: its early figures start at prev, its
                # first interval at s (the one before holds the end of its start too).
                self.warm = prev.t
                self._learn(prev)
                self._first_from = s
            elif (self.rid.role == "server"  # a PS server never steps: as from its start
                  or s.t - self.first_t >= WARMUP_AT_MOST * self.early_after_s):
                self.warm = s.t
        for unit in UNITS:
            now, before = progress(s, unit), None if prev is None else progress(prev, unit)
            if now is not None and before is not None and now > before:
                last = self.last_growth.get(unit)
                if last is not None:
                    self.longest_quiet[unit] = max(self.longest_quiet.get(unit, 0.0),
                                                   s.t - last)
                self.last_growth[unit] = s.t
            elif now is not None and unit not in self.last_growth:
                self.last_growth[unit] = s.t  # seen, not yet grown: quiet from here
        if s.state != self.state_since[0]:
            self.state_since = (s.state, s.t)
        if self.warm is not None:
            self._learn(s)
        self.samples.append(s)

    def _learn(self, s: RankSample) -> None:
        """Its early figures, from its samples once warm: its pace over its first window, and
        its busy shares over that window's halves and its first interval."""
        for unit in UNITS:
            count = progress(s, unit)
            if count is None:
                continue
            t0, c0 = self.first.setdefault(unit, (s.t, count))
            if unit not in self.early_rate and s.t - t0 >= self.early_after_s:
                self.early_rate[unit] = (count - c0) / (s.t - t0)
        if self.early is None:
            marks = self._marks
            start = self._first_from or (marks[0] if marks else None)
            if self.first_step is None and start is not None and start is not s:
                self.first_step = _between(start, s, "bytes")
            if not marks or s.t - marks[0].t >= self.early_after_s * len(marks) / 2:
                marks.append(s)
            if len(marks) == 3:
                a = _between(marks[0], marks[1], "bytes")  # the unit is not read here
                b = _between(marks[1], marks[2], "bytes")
                if a is not None and b is not None and a.dt > 0 and b.dt > 0:
                    self.early = (a, b)
                self._marks = []

    @property
    def latest(self) -> RankSample:
        return self.samples[-1]

    def halves(self, unit: Unit, persist_s: float, interval_s: float
               ) -> Optional[tuple[Span, Span]]:
        """The rank's change over each half of the persistence window ending at its last
        sample; None until the window is covered. Kept until a sample comes or the question
        changes."""
        key = (unit, persist_s, interval_s, self.latest.t, len(self.samples))
        if self._halves[0] == key:
            return self._halves[1]
        end = self.latest.t
        start, mid = end - persist_s, end - persist_s / 2
        got: Optional[tuple[Span, Span]] = None
        if self.first_t is not None and self.first_t <= start + interval_s / 2:
            # One pass for both halves (rather than span() each): every rank, every
            # judgement. Backwards, the first seen inside a half is its last.
            lo = start - interval_s / 2
            a0 = a1 = b0 = b1 = None
            for s in reversed(self.samples):
                t = s.t
                if lo <= t <= mid:
                    a1 = a1 or s
                    a0 = s
                if mid <= t <= end:
                    b1 = b1 or s
                    b0 = s
            a, b = _between(a0, a1, unit), _between(b0, b1, unit)
            if a is not None and b is not None and a.dt > 0 and b.dt > 0:
                got = (a, b)
        self._halves = (key, got)
        return got

    def span(self, t0: float, t1: float, unit: Unit) -> Optional[Span]:
        """The change between the first sample at or after t0 and the last at or before
        t1; None when fewer than two samples lie there."""
        a = b = None
        for s in self.samples:  # in time order: the first and the last inside
            if t0 <= s.t <= t1:
                if a is None:
                    a = s
                b = s
        return _between(a, b, unit)


def _stepped(a: Optional[RankSample], b: RankSample) -> bool:
    """Whether the rank stepped between its samples a and b: its step hook or its step lines
    grew."""
    if a is None:
        return False
    return any(x is not None and y is not None and y > x
               for x, y in ((a.hook_steps, b.hook_steps), (a.log_steps, b.log_steps)))


def _between(a: Optional[RankSample], b: Optional[RankSample], unit: Unit) -> Optional[Span]:
    """The change from sample a to a later b; None unless they are two samples."""
    if a is None or b is None or a is b:
        return None
    pa, pb = progress(a, unit), progress(b, unit)
    return Span(a.t, b.t, None if pa is None or pb is None else pb - pa,
                (b.run_s + b.wait_s) - (a.run_s + a.wait_s), b.wait_s - a.wait_s,
                (b.periods or 0) - (a.periods or 0),
                (b.throttled or 0) - (a.throttled or 0))


class JobSeries:
    """One job: its launchers on every host, its ranks, and the ranks it lost."""

    def __init__(self, key: str, first_t: float = 0.0) -> None:
        self.key = key
        self.first_t = first_t  # the host's time its first launcher was seen
        self.launchers: dict[tuple[str, int], Launcher] = {}
        self.ranks: dict[RankId, RankSeries] = {}
        # rank -> (the host's time it was missed at, the last lines of its log)
        self.gone: dict[RankId, tuple[float, tuple[str, ...]]] = {}
        # rank -> its memory cgroup's OOM kills (before, after) where they rose as it ended
        self.oom_killed: dict[RankId, tuple[int, int]] = {}
        # What a judgement carries to the next (replay judges at the same beat, so the same):
        # the link rule's memory (watch/linkmemory.py), and what follows here.
        self.link = LinkMemory()
        # Since when (the controller's clock) it has stepped below its early pace with nothing
        # found holding it (rules/progress.py: said once that lasted a window).
        self.slowed_since: Optional[float] = None
        self.told_at = 0.0  # when its standing still as a whole was last told (a save, a hang)
        # host -> the longest silence seen of it as its peers died for a lost peer: the cause
        # still once it answers again (its own ranks' ends then say they lost a peer too).
        self.lost_hosts: dict[str, float] = {}
        # rank -> its phase open now [since, last judged in it] (controller's clock), and the
        # phases it ended [(since, how long)] (rules/phases.py).
        self.phases: dict[RankId, list[float]] = {}
        self.phase_spells: dict[RankId, list[tuple[float, float]]] = {}
        # Its ranks started again in place (an elastic restart): when (controller's clock), and
        # how many had ended before: their ends are the earlier attempt's, kept apart.
        self.restarts: list[tuple[float, int]] = []
        # rank -> when (controller's clock) a CPU rule named it short of CPU: named on while
        # what holds it stays on its host (rules/held.py).
        self.held: dict[RankId, float] = {}
        self.paces = Paces()  # each rank's pace, followed after warm-up (watch/baseline.py)
        self.shapes: Shapes[Span] = Shapes()  # ... and its busy shares (RankSeries.early)
        # What its time went to, judgement by judgement (watch/timeshare.py).
        self.ledger = Ledger()

    def unit(self) -> Unit:
        latest = [r.latest for r in self.ranks.values() if r.samples]
        if any(s.hook_steps is not None for s in latest):
            return "hook"
        if any(s.log_steps for s in latest):
            return "steps"
        return "bytes"

    def live(self) -> list[RankSeries]:
        return [r for rid, r in self.ranks.items() if rid not in self.gone]

    def hosts(self) -> list[str]:
        return sorted({rid.host for rid in self.ranks})

    def launcher_hosts(self) -> set[str]:
        """Where its launchers ran, with ranks seen or not."""
        return {host for host, _ in self.launchers} | set(self.hosts())

    def nnodes(self) -> Optional[int]:
        """The nodes its launchers say it runs on (--nnodes N, or the least of an elastic
        N:M); None where none says."""
        said = [n for la in self.launchers.values() if (n := _nnodes(la.argv)) is not None]
        return max(said) if said else None

    def short_launchers(self) -> dict[str, tuple[int, int]]:
        """host -> (ranks seen, ranks its launcher starts) where a launcher says how many it
        starts (--nproc_per_node N) and fewer have been seen: its ranks are still starting
        (the last of them may show a sample after the first)."""
        out: dict[str, tuple[int, int]] = {}
        for (host, pid), la in self.launchers.items():
            want = _option(la.argv, "--nproc_per_node")
            seen = sum(1 for rid in self.ranks if rid.host == host and rid.launcher == pid)
            if want is not None and 0 < seen < want:
                out[host] = (seen, want)
        return out


def _nnodes(argv: Sequence[str]) -> Optional[int]:
    return _option(argv, "--nnodes")


def _option(argv: Sequence[str], name: str) -> Optional[int]:
    """A launcher's count option (`name N`, `name=N`; an elastic `N:M` gives N); None where
    it is not given, or not a positive count."""
    for i, a in enumerate(argv):
        value = a.split("=", 1)[1] if a.startswith(name + "=") else \
            argv[i + 1] if a == name and i + 1 < len(argv) else None
        if value is not None:
            first = value.split(":", 1)[0].strip()
            return int(first) if first.isdigit() and int(first) > 0 else None
    return None


class WatchState:
    """Everything the watch has seen so far, fed one Tick at a time."""

    @classmethod
    def for_policy(cls, interval_s: float, persist_s: float) -> WatchState:
        """The state a watch of that interval and window keeps: twice the window (a slow
        link that cannot be placed is said once it lasted that long) and a few samples."""
        keep = int(math.ceil(2 * max(persist_s, interval_s) / interval_s)) + 4
        return cls(keep, early_after_s=persist_s)

    def __init__(self, keep: int, early_after_s: float = 15.0) -> None:
        self.keep, self.early_after_s = keep, early_after_s
        self.jobs: dict[str, JobSeries] = {}
        self.hosts: dict[str, deque[HostSample]] = {}
        self.launcher_job: dict[tuple[str, int], str] = {}
        self.running: dict[str, set[int]] = {}  # host -> the launchers its last sample saw
        self.last_tick: dict[str, float] = {}  # host -> the controller's time of its last
        self.own_netns: dict[str, str] = {}  # host -> its sampler's network namespace
        self.stacks: dict[RankId, str] = {}  # a hung job's ranks: their innermost frames
        self.stacks_of: set[str] = set()  # the jobs whose stacks were taken
        self.foreign: set[tuple[str, int]] = set()  # (host, launcher) of other hosts
        self.launch_failure: Optional[LaunchFailure] = None  # what the job's launch saw
        self.clocks = HostClocks()  # each host's clock against the controller's

    def at(self, host: str, t: float) -> float:
        """A time on host's clock, on the controller's (watch/clocks.py)."""
        return self.clocks.at(host, t)

    def lag(self, host: str) -> float:
        """How late the host's last sample arrived beyond its steady delay (clocks.lag)."""
        samples = self.hosts.get(host)
        if not samples or host not in self.last_tick:
            return 0.0
        return self.clocks.lag(host, samples[-1].t, self.last_tick[host])

    def add(self, tick: Tick, received: float) -> None:
        self.last_tick[tick.host] = received
        self.clocks.add(tick.host, tick.sample.t, received)
        self.hosts.setdefault(tick.host, deque(maxlen=self.keep)).append(tick.sample)
        self.running[tick.host] = set(tick.running)
        if tick.netns and tick.host not in self.own_netns:
            self.own_netns[tick.host] = tick.netns
            self._drop_foreign()
        for la in tick.launchers:
            if self._foreign(la):
                self.foreign.add((la.host, la.pid))
                continue
            old = self.jobs.get(la.job)
            if old is not None and (any(h == la.host and pid not in tick.running
                                        for h, pid in old.launchers)
                                    or launchers_gone(old, self.running)):
                # The job launched again (the same --master): a new launcher where its
                # launcher there has gone, or anywhere once every launcher it had has gone
                # (run again on other hosts). Its earlier run ended, and is judged as such:
                # its ranks' clean exits are not deaths beside the new run's ranks.
                self._retire(old)
            job = self.jobs.setdefault(la.job, JobSeries(la.job, tick.sample.t))
            job.launchers[(la.host, la.pid)] = la
            self.launcher_job[(la.host, la.pid)] = la.job
        for rid, s in tick.ranks:
            key = self.launcher_job.get((rid.host, rid.launcher))
            if key is None:
                continue  # another host's, or its launcher's first line was lost
            job = self.jobs[key]
            series = job.ranks.get(rid)
            if series is None:
                restarted(job, rid, self.at(tick.host, tick.sample.t))
                series = job.ranks[rid] = RankSeries(rid, self.keep)
                series.early_after_s = self.early_after_s
            series.add(s)
        for rid, tail in tick.gone:
            key = self.launcher_job.get((rid.host, rid.launcher))
            if key is not None:
                self.jobs[key].gone[rid] = (tick.sample.t, tail)
        for rid, before, after in tick.oom:
            key = self.launcher_job.get((rid.host, rid.launcher))
            if key is not None:
                self.jobs[key].oom_killed[rid] = (before, after)

    def _retire(self, job: JobSeries) -> None:
        """Keeps a job's earlier run apart, under its key and run number: (run 1), ..."""
        n = 1 + sum(1 for k in self.jobs if k.startswith(job.key + " (run "))
        del self.jobs[job.key]
        job.key = f"{job.key} (run {n})"
        self.jobs[job.key] = job
        for la in job.launchers:
            self.launcher_job[la] = job.key

    def _foreign(self, la: Launcher) -> bool:
        """Whether a launcher that la's host sees runs in another watched host's own
        network namespace: hosts that share one kernel (a simulated cluster) see each
        other's processes, while a real host sees only its own and its containers'."""
        own = self.own_netns.get(la.host)
        return la.netns is not None and la.netns != own and any(
            la.netns == ns for h, ns in self.own_netns.items() if h != la.host)

    def _drop_foreign(self) -> None:
        for (host, pid), key in list(self.launcher_job.items()):
            job = self.jobs[key]
            la = job.launchers[(host, pid)]
            if not self._foreign(la):
                continue
            self.foreign.add((host, pid))
            del self.launcher_job[(host, pid)], job.launchers[(host, pid)]
            for rid in [r for r in job.ranks if (r.host, r.launcher) == (host, pid)]:
                del job.ranks[rid]
                job.gone.pop(rid, None)
            if not job.launchers:
                del self.jobs[key]

    def all_ranks(self) -> Iterable[RankSeries]:
        for job in self.jobs.values():
            yield from job.ranks.values()
