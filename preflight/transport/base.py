"""The Transport protocol, and what every transport is given to find its hosts."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import ClassVar, Optional, Protocol, runtime_checkable

from preflight.act.launch import LaunchOptions, Source
from preflight.collect.fanout import CollectOptions
from preflight.common.remote import Remote
from preflight.inventory import load
from preflight.inventory.resolve import ContainerLayers
from preflight.model.host import Host, HostOutcome, ThisMachine, Via
from preflight.model.plan import Node, Plan
from preflight.model.report import ReachNotes
from preflight.model.watch import SchedulerEnd
from preflight.placement import launcher

# Called as each host's outcome arrives: (outcome, hosts done, hosts in all).
OnResult = Callable[[HostOutcome, int, int], None]


@dataclass(frozen=True)
class HostQuery:
    """Where the hosts of a run are listed, and how their entries are read."""

    inventory: Optional[str] = None  # a file, a hostlist, or None
    fmt: str = "auto"  # inventory.FORMATS
    ssh_config: Optional[str] = None  # -F: the OpenSSH config (None: the usual ones)
    limit: Optional[str] = None  # --limit PATTERN
    # --python: the training interpreter of the hosts whose inventory entry names none, and
    # of this machine audited alone (None: python3 there)
    python: Optional[str] = None
    cli_timeout: bool = False  # --connect-timeout given: it beats the config's ConnectTimeout
    containers: ContainerLayers = (None, None)  # the policy's and the command line's


@runtime_checkable
class Transport(Protocol):
    """One way of reaching hosts, for one run (it holds what it opens until close)."""

    via: ClassVar[Via]
    # Audits this machine alone: no peers, so no active tests and no plan of a cluster.
    alone: ClassVar[bool]
    # The inventory format when none is given (Slurm: the allocation's nodelist).
    default_format: ClassVar[Optional[str]]

    def hosts(self, query: HostQuery) -> list[Host]:
        """The hosts to check, as this transport reaches them."""
        ...

    def collect(self, hosts: Sequence[Host], opts: CollectOptions,
                on_result: Optional[OnResult] = None) -> list[HostOutcome]:
        """One outcome per host, in order, each bounded by opts.deadline."""
        ...

    def remotes(self) -> dict[str, Remote]:
        """{host: Remote} for the hosts collect() kept (opts.keep_connections)."""
        ...

    def notes(self) -> ReachNotes:
        """What the report records of how this run reached its hosts."""
        ...

    def launch(self, nodes: Sequence[Node], source: Source, query: HostQuery,
               opts: LaunchOptions) -> int:
        """Runs a report's plan on its hosts; returns the exit code."""
        ...

    def emit(self, plan: Plan, directory: str) -> str:
        """Writes the plan's launch files into directory; returns a line saying what."""
        ...

    def reach(self, hosts: Sequence[Host], connect_timeout: float,
              accept_new_host_keys: bool) -> dict[str, str]:
        """Makes the hosts ready to run commands on, in parallel and bounded (no probe);
        returns {host: why not} for those it could not reach; remotes() hands out the
        others."""
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


def host_scripts(plan: Plan, directory: str) -> str:
    """Writes <host>.sh and <host>.env for every plan host (what a transport that starts
    each host's launcher itself emits); returns the line saying so."""
    launcher.emit(plan, directory)
    return f"launch scripts: {len(plan.nodes)} hosts in {directory}"


def inventory_hosts(query: HostQuery) -> list[Host]:
    """The inventory's hosts as SSH reaches them (the OpenSSH config applied, --limit), with
    the config's ConnectTimeout dropped when --connect-timeout was given."""
    hosts = load(query.inventory, query.fmt, query.ssh_config, query.limit, query.containers,
                 query.python)
    return cli_timeout_wins(hosts) if query.cli_timeout else hosts


def cli_timeout_wins(hosts: Sequence[Host]) -> list[Host]:
    """The hosts with their config's ConnectTimeout dropped, their hops' too: a
    --connect-timeout given on the command line wins over the OpenSSH config."""
    def dropped(h: Host) -> Host:
        return h.with_ssh(replace(h.ssh, connect_timeout=None,
                                  jump=tuple(dropped(j) for j in h.ssh.jump)))
    return [h if isinstance(h.target, ThisMachine) else dropped(h) for h in hosts]
