"""The Transport protocol: one way of reaching hosts, running commands on them and shipping
what runs there. It knows no stage: the composers (pipeline.py, watching.py, launching.py)
hand it what to run (the collect stage's probe, a plan's batch script) and use what it hands
out (Remotes) with the stages. What differs between transports is said by their capabilities
(alone, batch), never asked of their class."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import ClassVar, Optional, Protocol, runtime_checkable

from preflight.common.hostjob import CollectOptions, OnResult, ProbeCall
from preflight.common.remote import Remote
from preflight.model.host import Host, HostOutcome, Via
from preflight.model.report import ReachNotes
from preflight.model.watch import SchedulerEnd


@dataclass(frozen=True)
class BatchJob:
    """One batch script to run as a scheduler's job (a plan run as one job)."""

    text: str  # the batch script
    args: tuple[str, ...]  # what follows it on the command line (the training script's)
    name: str  # the job's name: unique, it finds the job once it runs
    env: Mapping[str, str] = field(default_factory=dict)  # exported to the job's processes
    chdir: Optional[str] = None
    timeout: Optional[float] = None  # the job's time limit; None: the scheduler's
    on_running: Optional[Callable[[str], None]] = None  # told the job's id once it runs


@dataclass(frozen=True)
class Submitted:
    """How a batch job ended: its exit (None: it never ran, or ran past its limit)."""

    exit: Optional[int]
    job_id: str
    error: str  # why it failed, in the scheduler's words ("" when it did not)
    output: str = ""  # where the job's output is
    timed_out: bool = False


@runtime_checkable
class Transport(Protocol):
    """One way of reaching hosts, for one run (it holds what it opens until close)."""

    via: ClassVar[Via]
    # Audits this machine alone: no inventory, no peers, so no active tests and no plan.
    alone: ClassVar[bool]
    # Runs a plan as one scheduler batch job (submit), not a launcher started on each host.
    batch: ClassVar[bool]
    # The inventory format when none is given (Slurm: the allocation's nodelist).
    default_format: ClassVar[Optional[str]]

    def collect(self, hosts: Sequence[Host], opts: CollectOptions, call: ProbeCall,
                on_result: Optional[OnResult] = None) -> list[HostOutcome]:
        """Runs call on every host: one outcome per host, in order, each bounded by
        opts.deadline."""
        ...

    def remotes(self) -> dict[str, Remote]:
        """{host: Remote} for the hosts collect() kept (opts.keep_connections) or reach()
        reached."""
        ...

    def notes(self) -> ReachNotes:
        """What the report records of how this run reached its hosts."""
        ...

    def reach(self, hosts: Sequence[Host], connect_timeout: float,
              accept_new_host_keys: bool) -> dict[str, str]:
        """Makes the hosts ready to run commands on, in parallel and bounded (no probe);
        returns {host: why not} for those it could not reach; remotes() hands out the
        others."""
        ...

    def submit(self, job: BatchJob) -> Submitted:
        """Runs a batch script as one scheduler job and waits for its end (a transport
        whose `batch` is true; the others refuse)."""
        ...

    def follow(self, jobid: str) -> None:
        """Runs the commands to come inside the scheduler's job jobid (a watch of the job it
        runs: its samplers are that job's steps). A transport without a scheduler runs them
        on the hosts as they are."""
        ...

    def job_end(self) -> Optional[SchedulerEnd]:
        """The end of the scheduler's job the commands run in, as the scheduler says it.
        None while it runs, where no such job is followed (no scheduler; one this run holds
        for itself, whose end is the run's own) or the scheduler does not answer: no end
        is ever read from silence."""
        ...

    def close(self) -> None:
        """Closes what the run opened (connections, a job); safe to call twice."""
        ...


def no_batch(via: Via) -> Submitted:
    """A transport without a scheduler's batch jobs, asked for one."""
    return Submitted(None, "", f"--transport {via.value} runs no batch job")
