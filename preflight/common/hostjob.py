"""The probe on every host, bounded in concurrency and in time: what a stage asks every
transport to run (ProbeCall: the collect stage's probe and its reading of an answer), and the
fan-out that runs it, one Job a host. A transport's kind of Job says only how the command
reaches a host (over SSH, as a process); what is run and what its answer means is the
ProbeCall's, so no transport knows the collect stage."""

from __future__ import annotations

import queue
import resource
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Optional, Protocol

from preflight.model.host import Host, HostFailure, HostOutcome, Stage

# What the probe may use of a host's deadline: the rest covers connect, upload, transfer.
PROBE_MARGIN_S = 3.0


@dataclass(frozen=True)
class CollectOptions:
    forks: int = 32
    connect_timeout: float = 10.0
    deadline: float = 60.0  # per host, from the start of its connection to parsed facts
    accept_new_host_keys: bool = False
    cpu_sample_s: float = 1.0  # spans the probe's own work (and the Paddle import)
    paddle: bool = True  # False: the probe skips Paddle's import (~1 s of CPU per host)
    files: tuple[str, ...] = ()  # paths the probe hashes (the job's script and configs)
    keep_connections: bool = False  # hand answered hosts' connections on (network tests)


@dataclass(frozen=True)
class Answer:
    """A probe that exited 0 on a host: what it printed, and when (the controller's epoch)
    it was sent and received, which bound the host's clock."""

    stdout: str
    sent_at: float
    received_at: float
    elapsed_s: float


class ProbeCall(Protocol):
    """What runs on every host and what its answer means (collect/fanout.py's PROBE)."""

    def payload(self) -> bytes:
        """What travels on the command's stdin."""
        ...

    def argv(self, host: Host, opts: CollectOptions, budget: float) -> list[str]:
        """The command line, run without a shell (this machine)."""
        ...

    def script(self, host: Host, opts: CollectOptions, budget: float) -> str:
        """The shell line, bounded on the host by its budget."""
        ...

    def command(self, host: Host, opts: CollectOptions, budget: float) -> str:
        """The one command a remote login shell runs (every inventory value quoted)."""
        ...

    def read(self, host: Host, answer: Answer) -> HostOutcome:
        """The host's outcome from its answer: its facts, or why what it printed is none."""
        ...


OnResult = Callable[[HostOutcome, int, int], None]  # (outcome, hosts done, hosts in all)


class Job:
    """One host's collection in its own thread; the dispatcher may abort it at its deadline.
    A transport's kind of job says how the command reaches the host (_collect, abort)."""

    def __init__(self, host: Host, opts: CollectOptions, call: ProbeCall,
                 results: queue.Queue[Any], go: threading.Event) -> None:
        self.host, self.opts, self.call, self.results, self.go = host, opts, call, results, go
        self.stage = Stage.CONNECT
        self.started = time.monotonic()
        self.conn: Any = None  # an open connection fan_out() hands on (keep)
        self.keep = False
        self.budget = opts.deadline  # what the probe may spend on the host; set before it runs
        self.sent_at = 0.0  # the controller's epoch when the probe's command was sent
        self.thread = threading.Thread(target=self._run, name=f"probe-{host.name}", daemon=True)

    def _run(self) -> None:
        self.go.wait()
        self.started = time.monotonic()
        try:
            outcome = self._collect()
        except BaseException as e:  # a host's failure is data, whatever it raised
            outcome = HostOutcome(self.host, failure=self.failure(e))
        self.results.put((self, outcome))

    def _collect(self) -> HostOutcome:
        raise NotImplementedError

    def failure(self, e: BaseException) -> HostFailure:
        """Why the host could not be checked, from what collecting it raised (a transport
        says it in its own terms)."""
        return HostFailure(self.stage, f"{type(e).__name__}: {e}"[:400])

    def abort(self) -> None:
        """Cuts the host off, unblocking whatever the job's thread waits on."""

    def remaining(self) -> float:
        return self.opts.deadline - (time.monotonic() - self.started)

    def probe_budget(self) -> float:
        """What the probe may spend on the host, of what is left of the deadline."""
        self.budget = max(1.0, self.remaining() - PROBE_MARGIN_S)
        return self.budget

    def finish(self, stdout: str, exited: int, stderr: str) -> HostOutcome:
        received = time.time()  # with sent_at: what bounds the host's clock
        elapsed = time.monotonic() - self.started
        if exited != 0:
            return HostOutcome(self.host, failure=HostFailure(
                Stage.PROBE, exit_reason(exited, stderr, self.budget)), elapsed_s=elapsed)
        self.stage = Stage.PARSE
        return self.call.read(self.host, Answer(stdout, self.sent_at, received, elapsed))

    def deadline_outcome(self) -> HostOutcome:
        return HostOutcome(self.host, failure=deadline_failure(self),
                           elapsed_s=time.monotonic() - self.started)


def exit_reason(exited: int, stderr: str, budget: float) -> str:
    """Why a probe that exited non-zero gave no facts, in words."""
    tail = " | ".join(stderr.strip().splitlines()[-3:])[:400]
    if exited == 124:  # timeout(1)'s code
        return f"probe ran past its {budget:.0f} s time limit on the host"
    if exited == -1:  # paramiko's value when the channel closed without a status
        return ("probe ended without an exit status (connection closed, or sshd lost it): "
                f"{tail or 'no output'}")
    if 128 < exited < 160:  # the shell's and timeout(1)'s 128 + signal number
        return f"probe killed by signal {exited - 128}: {tail or 'no output'}"
    return f"probe exited {exited}: {tail or 'no output'}"


def deadline_failure(job: Job) -> HostFailure:
    return HostFailure(Stage.TIMEOUT, f"no answer within the {job.opts.deadline:.0f} s deadline "
                       f"(stopped during {job.stage.value})")


def fds_needed(n_hosts: int, opts: CollectOptions) -> int:
    """File descriptors a collection may hold at once: a socket per host in flight (the
    channel's wake-up pipe is one more while it runs), and every kept connection."""
    in_flight = min(n_hosts, max(1, opts.forks))
    return 64 + 3 * in_flight + (n_hosts if opts.keep_connections else 0)


def raise_fd_limit(needed: int) -> int:
    """Raises the soft RLIMIT_NOFILE towards the hard one when `needed` is above it (the
    usual soft 1024 runs out near a thousand kept connections); returns the soft limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= needed:
        return soft
    target = needed if hard == resource.RLIM_INFINITY else min(hard, needed)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    except (ValueError, OSError):
        return soft
    return target


def fan_out(hosts: Sequence[Host], opts: CollectOptions, job: type[Job], call: ProbeCall,
            on_result: Optional[OnResult] = None,
            connections: Optional[dict[str, Any]] = None) -> list[HostOutcome]:
    """Returns one outcome per host, in inventory order, within about
    ceil(len(hosts) / forks) * deadline seconds whatever the hosts do; job: how the command
    reaches a host (the transport's), call: what runs there and what its answer means.

    With opts.keep_connections, the open connections of answered hosts are put in
    `connections` by host name; the caller closes them."""
    kept: dict[str, Any] = {} if connections is None else connections
    raise_fd_limit(fds_needed(len(hosts), opts))
    results: queue.Queue[Any] = queue.Queue()
    pending = list(hosts)
    pending.reverse()
    running: dict[str, Job] = {}
    outcomes: dict[str, HostOutcome] = {}

    def record(outcome: HostOutcome) -> None:
        outcomes[outcome.host.name] = outcome
        if on_result:
            on_result(outcome, len(outcomes), len(hosts))

    def start(host: Host, go: threading.Event) -> Job:
        return job(host, opts, call, results, go)

    try:
        _dispatch(start, opts, pending, running, results, record, kept)
    except KeyboardInterrupt:
        # Keep what was learned: answered hosts stay, the rest are marked, none is dropped.
        for j in running.values():
            j.abort()
        for host in [j.host for j in running.values()] + pending[::-1]:
            record(HostOutcome(host, failure=HostFailure(
                Stage.INTERRUPTED, "run interrupted before this host answered")))
    return [outcomes[h.name] for h in hosts]


def _dispatch(start: Callable[[Host, threading.Event], Job], opts: CollectOptions,
              pending: list[Host], running: dict[str, Job], results: queue.Queue[Any],
              record: Callable[[HostOutcome], None], kept: dict[str, Any]) -> None:
    # Thread.start() waits until the new thread holds the GIL; with the first hosts already
    # deep in their handshakes that took ~5 ms a thread (64 hosts: the last began 0.3 s
    # late). So the first wave starts gated and is let go together.
    go = threading.Event()
    while pending or running:
        while pending and len(running) < max(1, opts.forks):
            job = start(pending.pop(), go)
            running[job.host.name] = job
            job.thread.start()
        go.set()
        now = time.monotonic()
        next_deadline = min(j.started + opts.deadline for j in running.values())
        try:
            job, outcome = results.get(timeout=max(0.01, min(0.5, next_deadline - now)))
        except queue.Empty:
            pass
        else:
            if running.get(job.host.name) is job:  # a late answer after a timeout is dropped
                del running[job.host.name]
                if job.keep:
                    kept[job.host.name] = job.conn
                record(outcome)
            elif job.keep:
                job.conn.close()
        now = time.monotonic()
        for name, job in list(running.items()):
            if now - job.started >= opts.deadline:
                del running[name]
                job.abort()
                record(job.deadline_outcome())
