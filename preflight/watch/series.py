"""Samples kept over time: each rank's recent samples and when it last made progress, grouped
by job (the launchers of one job on every host), and each host's. Only what the judgement
needs is kept: a window of samples, and a few running figures of the whole watch."""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable, Sequence
from typing import Optional

from preflight.model.watch import HostSample, LaunchFailure, RankId
from preflight.watch.attempts import launchers_gone, restarted
from preflight.watch.baseline import Paces, Shapes
from preflight.watch.clocks import HostClocks
from preflight.watch.linkmemory import LinkMemory
from preflight.watch.rankseries import (
    UNIT_WORDS,
    UNITS,
    WARMUP_AT_MOST,
    RankSeries,
    Span,
    Unit,
    progress,
)
from preflight.watch.samples import Launcher, Tick
from preflight.watch.timeshare import Ledger

# The rank's series and its words, where the rules and the replay have read them.
__all__ = ["UNITS", "UNIT_WORDS", "WARMUP_AT_MOST", "JobSeries", "RankSeries", "Span", "Unit",
           "WatchState", "progress"]


class JobSeries:
    """One job: its launchers on every host, its ranks, and the ranks it lost."""

    def __init__(self, key: str, first_t: float = 0.0) -> None:
        self.key = key
        self.first_t = first_t  # the host's time its first launcher was seen
        self.launchers: dict[tuple[str, int], Launcher] = {}
        self.launcher_pids: dict[str, set[int]] = {}  # host -> its launchers' pids (of those)
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

    def add_launcher(self, la: Launcher) -> None:
        self.launchers[(la.host, la.pid)] = la
        self.launcher_pids.setdefault(la.host, set()).add(la.pid)

    def drop_launcher(self, host: str, pid: int) -> None:
        del self.launchers[(host, pid)]
        self.launcher_pids.get(host, set()).discard(pid)

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
        # What a host's first sample makes foreign is looked up, not searched for: at a
        # thousand hosts a search of every launcher at each was a second of their first
        # interval. Those owned by a watched host's sampler, and the launchers seen in each.
        self.owned_netns: set[str] = set()
        self.netns_launchers: dict[str, list[tuple[str, int]]] = {}
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
            self.owned_netns.add(tick.netns)
            self._drop_foreign(tick.host, tick.netns)
        for la in tick.launchers:
            if self._foreign(la):
                self.foreign.add((la.host, la.pid))
                continue
            old = self.jobs.get(la.job)
            if old is not None and (any(pid not in tick.running
                                        for pid in old.launcher_pids.get(la.host, ()))
                                    or launchers_gone(old, self.running)):
                # The job launched again (the same --master): a new launcher where its
                # launcher there has gone, or anywhere once every launcher it had has gone
                # (run again on other hosts). Its earlier run ended, and is judged as such:
                # its ranks' clean exits are not deaths beside the new run's ranks.
                self._retire(old)
            job = self.jobs.setdefault(la.job, JobSeries(la.job, tick.sample.t))
            job.add_launcher(la)
            self.launcher_job[(la.host, la.pid)] = la.job
            if la.netns is not None:
                self.netns_launchers.setdefault(la.netns, []).append((la.host, la.pid))
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
        # Another host's: a namespace not la's host's own (which no other host owns then).
        own = self.own_netns.get(la.host)
        return la.netns is not None and la.netns != own and la.netns in self.owned_netns

    def _drop_foreign(self, host: str, netns: str) -> None:
        """Drops the launchers that host's first namespace makes foreign: those seen in it
        on other hosts, and host's own seen in another's."""
        seen = self.netns_launchers.get(netns, []) + [
            (host, pid) for job in self.jobs.values() for pid in job.launcher_pids.get(host, ())]
        for h, pid in seen:
            key = self.launcher_job.get((h, pid))
            if key is None:
                continue  # dropped already
            job = self.jobs[key]
            la = job.launchers[(h, pid)]
            if not self._foreign(la):
                continue
            self.foreign.add((h, pid))
            del self.launcher_job[(h, pid)]
            job.drop_launcher(h, pid)
            for rid in [r for r in job.ranks if (r.host, r.launcher) == (h, pid)]:
                del job.ranks[rid]
                job.gone.pop(rid, None)
            if not job.launchers:
                del self.jobs[key]

    def all_ranks(self) -> Iterable[RankSeries]:
        for job in self.jobs.values():
            yield from job.ranks.values()
