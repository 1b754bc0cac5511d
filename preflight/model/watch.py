"""What `preflight watch` learns of a running job: who each rank is, what one sample of a rank
and of a host says, and the settings its judgement uses."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Optional

from preflight.model.findings import Finding

Role = Literal["worker", "trainer", "server"]  # collective rank; PS trainer; PS server


@dataclass(frozen=True)
class RankId:
    """One rank of a job: where it runs and what it is (its pid tells it apart from a rank
    of the same number that a restart started)."""

    host: str
    role: Role
    rank: Optional[int]  # the global rank (trainer id, server id); None when not said
    pid: int
    launcher: int  # the pid of the launcher that started it, on its host

    def __hash__(self) -> int:
        # Computed once: a rank keys the rules' tables, thousands of lookups a judgement, and
        # a frozen dataclass's own hash builds the tuple of its fields at each one.
        try:
            return self.__dict__["_hash"]  # type: ignore[no-any-return]
        except KeyError:
            h = hash((self.host, self.role, self.rank, self.pid, self.launcher))
            object.__setattr__(self, "_hash", h)
            return h

    def __getstate__(self) -> dict[str, object]:
        # A string's hash differs between processes: a copy computes its own.
        return {k: v for k, v in self.__dict__.items() if k != "_hash"}

    def name(self) -> str:
        """"node03 rank 2 (worker)"."""
        num = "?" if self.rank is None else str(self.rank)
        return f"{self.host} {'server' if self.role == 'server' else 'rank'} {num} ({self.role})"

    def order(self) -> tuple[str, bool, int, str]:
        """The order ranks are listed in: by role, then rank (unsaid ones last), then host."""
        return (self.role, self.rank is None, self.rank or 0, self.host)

    def doc(self) -> dict[str, object]:
        """The rank as logs and reports keep it."""
        return {"host": self.host, "role": self.role, "rank": self.rank, "pid": self.pid}


@dataclass(frozen=True)
class RankSample:
    """A rank at one moment, as its host's /proc shows it; counters are totals so far."""

    t: float  # the host's wall clock
    state: str  # /proc/<pid>/stat: R, S, D, T, t, Z, ...
    cpu_s: float = 0.0  # user + system
    run_s: float = 0.0  # on a CPU, summed over its threads (schedstat)
    wait_s: float = 0.0  # runnable but waiting for a CPU, summed over its threads
    timed: bool = True  # False: the kernel gives no schedstat: run_s and wait_s are unknown
    running: int = 0  # threads in R
    blocked: int = 0  # threads in D
    wchan: Optional[str] = None
    log_size: Optional[int] = None  # its log (stdout's file): bytes so far
    log_steps: Optional[int] = None  # step lines counted so far (the step pattern)
    log_last: Optional[str] = None  # the last line, when it changed
    log_path: Optional[str] = None
    hook_steps: Optional[int] = None  # what preflight.watch.step() counted
    quota_cores: Optional[float] = None  # the smallest CPU quota over its cgroups
    periods: Optional[int] = None  # that cgroup's CFS periods so far
    throttled: Optional[int] = None  # ... and those it was throttled in
    throttled_s: Optional[float] = None
    sendq: tuple[tuple[str, int], ...] = ()  # (peer address, bytes queued to it) where any
    log_tail: tuple[str, ...] = ()  # its log's last lines, once it has exited (a zombie)
    error: Optional[str] = None  # what could not be read this time
    gpus: tuple[int, ...] = ()  # the GPUs it drives (NVML's indices on its host)
    oom_kills: Optional[int] = None  # the kernel's OOM kills in its memory cgroup so far
    # Bytes it read and wrote through the storage layer so far (/proc/PID/io); None: not read.
    io_read: Optional[int] = None
    io_written: Optional[int] = None
    frozen: bool = False  # its cgroup is frozen (the freezer: docker pause, a job's freeze)


@dataclass(frozen=True)
class GpuSample:
    """One GPU at one moment (NVML, or nvidia-smi): None where it did not say."""

    index: int
    util: Optional[int] = None  # % of the last period a kernel ran on it
    mem_util: Optional[int] = None  # % of it the memory was read or written
    sm_mhz: Optional[int] = None  # its SM clock now
    sm_max_mhz: Optional[int] = None  # ... and the highest it can run
    reasons: Optional[int] = None  # NVML's clock event (throttle) reasons, a bitmask
    temp_c: Optional[int] = None
    power_w: Optional[float] = None
    pids: tuple[int, ...] = ()  # compute processes on it (NVML only)
    error: Optional[str] = None  # a GPU that did not answer (lost, or nvidia-smi silent)


@dataclass(frozen=True)
class HostSample:
    t: float
    cpus: Optional[int] = None
    load1: Optional[float] = None
    psi_cpu: Optional[float] = None  # % of the last 10 s some task waited for a CPU
    psi_memory: Optional[float] = None
    mem_avail: Optional[int] = None
    nics: tuple[tuple[str, int, int, int, int], ...] = ()  # name, rx, rx drops, tx, tx drops
    # Each interface's root qdisc: name, kind, packets held back over its rate so far
    # (overlimits), bytes queued in it now (backlog)
    qdiscs: tuple[tuple[str, str, int, int], ...] = ()
    # ... the interfaces among them its jobs' traffic leaves by now (the routes to the peers
    # its ranks have data queued for, and the NICs under those: hostside/netlink.carrying)
    carriers: tuple[str, ...] = ()
    cost_s: Optional[float] = None  # the sampler's own CPU so far
    tcp_out: Optional[int] = None  # TCP segments sent so far (/proc/net/snmp)
    tcp_retrans: Optional[int] = None  # ... and sent again
    gpus: tuple[GpuSample, ...] = ()
    gpu_source: Optional[str] = None  # "nvml" or "nvidia-smi"
    gpu_error: Optional[str] = None  # a driver, but its GPUs could not be read


# Slurm's states of a job that has not ended, as squeue prints them.
SCHEDULER_RUNNING = ("PENDING", "CONFIGURING", "RUNNING", "RESIZING", "SUSPENDED",
                     "REQUEUED", "REQUEUE_FED", "REQUEUE_HOLD", "RESV_DEL_HOLD", "SPECIAL_EXIT")
SCHEDULER_GONE = "GONE"  # no longer listed by the scheduler: ended, how no longer known
# Ending: Slurm is stopping its steps (KillWait) and says how it ended only after that.
SCHEDULER_ENDING = ("COMPLETING", "SIGNALING", "STAGE_OUT", "STOPPED")
# Ended by the scheduler or its user as a whole, whatever its ranks were doing: nobody's
# fault on any host of it.
SCHEDULER_STOPPED = {"CANCELLED": "was cancelled (scancel: its user or an administrator)",
                     "TIMEOUT": "reached its time limit",
                     "PREEMPTED": "was preempted (for a job of higher priority)",
                     "DEADLINE": "reached its deadline (--deadline)"}


@dataclass(frozen=True)
class SchedulerEnd:
    """What the scheduler says of the job the watch follows, once it is no longer running:
    Slurm's state of it ("CANCELLED", "COMPLETING", ...), and its reason."""

    job: str  # the scheduler's id of it
    state: str
    reason: str = ""

    @property
    def final(self) -> bool:
        """Ended, with how (Slurm says so only once every step of it has ended)."""
        return self.state not in SCHEDULER_ENDING

    @property
    def stopped(self) -> Optional[str]:
        """How the scheduler or a user stopped it as a whole; None where it ended of itself."""
        return SCHEDULER_STOPPED.get(self.state)


@dataclass(frozen=True)
class LaunchFailure:
    """What `preflight launch` saw of the job it started: a host's launcher exited non-zero
    (the launch then stopped the job on every host). Where a rank dies without a word in its
    log (killed by a signal), this is what tells its end from the job's own."""

    host: str
    why: str  # as the launch said it: "exit 1"
    at: float  # time.time() when the launch saw it


# --act-after: a host named without a break for this long is acted on. Long enough to outlast
# the phases of a job the watch does not tell (ByteRobust acts on alerts repeated within
# 5 min; NVRx after 2 repeats; Ray's NCCL callback after about 10 min).
ACT_AFTER_S = 120.0
PHASE_MAX_S = 600.0  # --phase-max: a phase of the job's own running longer is a warning


@dataclass(frozen=True)
class WatchPolicy:
    """When a rank is named: slower than its peers' median by margin, for persist_s; a job
    with no progress for hang_s (and for 5 times the longest quiet spell it had before)."""

    interval_s: float = 5.0
    margin: float = 0.25
    persist_s: float = 15.0
    hang_s: float = 60.0
    # A phase of the job's own (rules/phases.py) running longer than this is a warning.
    phase_max_s: float = PHASE_MAX_S
    phase_pattern: Optional[str] = None  # what a phase's log line says (default: PHASE_WORDS)


# What a watch finding holds responsible, by the kind of its cause: a rank stopped, held by a
# tracer, ended (its error, a kill, the launch's word; or first, its words unread), lost with
# its host (its peers died for it), the job hung, a rank short of CPU, a trainer slower on
# its own, a link, a GPU, the whole job stopped; "none": a finding that blames nobody (a
# pass line, could not check).
Cause = Literal["stopped", "traced", "exit", "exit-unread", "launch", "lost-host", "hang",
                "cpu", "pace", "link", "gpu", "frozen", "storage", "job-stopped", "phase", "none"]


@dataclass(frozen=True)
class Blame:
    """Whom and what a watch finding names, typed: what `--act`, the results log and the
    judgement's own precedence read (never its message)."""

    cause: Cause = "none"
    ranks: tuple[RankId, ...] = ()  # the ranks it holds responsible
    pairs: tuple[tuple[str, str], ...] = ()  # (sender, receiver) hosts of the links it names
    job: Optional[str] = None  # the job it is about, where that matters (a hang's stacks)
    error: Optional[str] = None  # the error a rank ended with, as its log said it


NO_BLAME = Blame()


@dataclass(frozen=True)
class WatchFinding(Finding):
    """A finding of the watch, with whom it blames."""

    blame: Blame = NO_BLAME


def blame_of(f: Finding) -> Blame:
    """Whom the finding blames: nobody, where it is not one of the watch's."""
    return f.blame if isinstance(f, WatchFinding) else NO_BLAME


@dataclass(frozen=True)
class ActStep:
    """A step --act took or would take (drain, stop, check, launch) or why it did not (wait,
    skip), as a rehearsal of a log says it."""

    step: str
    text: str
    fields: Mapping[str, Any] = field(default_factory=dict)


# What --act would do at a judgement (its time, its findings), rehearsed on a log: its steps.
ActAt = Callable[[float, Sequence[Finding]], Sequence[ActStep]]
