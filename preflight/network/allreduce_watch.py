"""How an all-reduce's controller decides from what the ranks did: its view of every host's
progress (Watch), and when the run stops and why: a rank that stopped beating, a launch that
stopped progressing before every rank joined (who never joined), the collectives' deadline
(slow, or a stall with nobody to blame), or its own time limit while still progressing."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Optional

from preflight.common.remote import Done
from preflight.network import progress as P
from preflight.network.allreduce_cmd import AllReduceOptions

STALL_WINDOW_S = 15.0  # at the deadline, a collective completed this recently: still going


@dataclass
class Watch:
    """What the controller saw: how the run stopped (kind), the hosts it names and why, and
    the last progress of every host (None: no status from it yet)."""

    progress: dict[str, Optional[P.HostProgress]]
    # ended, failed, never-joined, stalled, slow, stall, out-of-time, timeout
    kind: str = "ended"
    named: dict[str, str] = field(default_factory=dict)
    launch_s: Optional[float] = None
    idle_s: Optional[float] = None
    deadline_s: Optional[float] = None  # the deadline that cut the run, from the launch
    best: dict[tuple[str, ...], int] = field(default_factory=dict)  # P.marks' highest
    moved_at: float = 0.0  # seconds from the launch when a mark last rose

    def moved(self, nproc: Mapping[str, int], elapsed: float) -> None:
        """Notes the time when any of the run's counts rose above its highest so far."""
        for key, value in P.marks(self.progress, nproc).items():
            if value > self.best.get(key, -1):
                self.best[key] = value
                self.moved_at = elapsed


# (what, done, total): how far a long phase got, for a progress bar.
OnProgress = Callable[[str, int, int], None]


def progress_of(progress: Mapping[str, Optional[P.HostProgress]], nproc: Mapping[str, int],
                n_sizes: int) -> tuple[str, int, int]:
    """How far the all-reduce got: hosts at the rendezvous until all joined, then the message
    sizes every rank has finished."""
    joined = sum(1 for h, p in progress.items() if p is not None
                 and p.stage(nproc.get(h, 1)) >= P.JOINED)
    if joined < len(nproc):
        return "hosts joined", joined, len(nproc)
    done = min((len(r.sizes) for p in progress.values() if p is not None for r in p.ranks),
               default=0)
    return "message sizes done", min(done, n_sizes), n_sizes


def decide(watch: Watch, nproc: Mapping[str, int], opts: AllReduceOptions, elapsed: float,
            joined_at: Optional[float]) -> bool:
    """Sets how the run stops from the latest progress; False: let it go on."""
    progress = watch.progress
    stopped = P.stale(progress)
    if stopped:
        watch.kind, watch.named = "stalled", stopped
        return True
    if joined_at is None and not P.all_joined(progress, nproc):
        idle = elapsed - watch.moved_at
        if idle < opts.launch_idle_s and elapsed < opts.timeout:
            return False
        watch.deadline_s = elapsed
        if idle < opts.launch_idle_s:
            # Its own time limit, not the cluster: the ranks still moved on a moment ago.
            watch.kind, watch.idle_s = "out-of-time", idle
            return True
        watch.idle_s = idle
        watch.named = P.behind(progress, nproc)
        watch.kind = "never-joined" if watch.named else "stall"
        return True
    if P.all_done(progress, nproc):
        return False  # the launchers are exiting
    joined = joined_at if joined_at is not None else elapsed
    deadline = opts.timeout if opts.collective_s is None else min(
        opts.timeout, joined + opts.collective_s)
    if elapsed < deadline:
        return False
    watch.deadline_s = deadline
    watch.idle_s = P.idle_s(progress)
    window = max(STALL_WINDOW_S, 3 * opts.op_s)
    watch.kind = "slow" if watch.idle_s is not None and watch.idle_s < window else "stall"
    return True


def finished_anyway(done: Done, progress: Optional[P.HostProgress], nproc: int) -> bool:
    """A command that ended with no exit status (its SSH connection or session went) after
    the progress read from its host showed every local rank finished: the measurement is
    whole, and a connection lost at the end is no fault of the collective path."""
    return (done.exit == -1 and progress is not None and len(progress.ranks) >= nproc
            and all(r.done for r in progress.ranks))
