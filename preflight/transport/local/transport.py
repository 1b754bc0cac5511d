"""This machine alone (check with no inventory): the probe as a local subprocess, no SSH, no
peers and so no plan to launch."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import ClassVar, Optional

from preflight.act.launch import LaunchOptions, Source
from preflight.collect import fanout
from preflight.collect.fanout import CollectOptions
from preflight.common.remote import Remote
from preflight.config.container import spec_of
from preflight.config.errors import UsageError
from preflight.model.host import Host, HostOutcome, Via
from preflight.model.plan import Node, Plan
from preflight.model.report import ReachNotes
from preflight.model.watch import SchedulerEnd
from preflight.transport.base import HostQuery, OnResult, host_scripts
from preflight.transport.local.run import LocalJob, LocalRemote, local_host


class LocalTransport:
    via: ClassVar[Via] = Via.LOCAL
    alone: ClassVar[bool] = True
    default_format: ClassVar[Optional[str]] = None

    def __init__(self) -> None:
        self.answered: list[str] = []

    def hosts(self, query: HostQuery) -> list[Host]:
        if query.inventory:
            raise UsageError(f"--transport local checks this machine alone; it reads no "
                             f"inventory ({query.inventory})")
        me = local_host(python=query.python or "python3")
        # The job's container on this machine: the policy's and the command line's.
        return [replace(me, container=spec_of("command line", list(query.containers),
                                              me.name))]

    def collect(self, hosts: Sequence[Host], opts: CollectOptions,
                on_result: Optional[OnResult] = None) -> list[HostOutcome]:
        outcomes = fanout.collect(hosts, opts, on_result=on_result, job=LocalJob)
        self.answered = [o.host.name for o in outcomes if o.ok]
        return outcomes

    def remotes(self) -> dict[str, Remote]:
        return {name: LocalRemote(name) for name in self.answered}

    def notes(self) -> ReachNotes:
        return ReachNotes()

    def launch(self, nodes: Sequence[Node], source: Source, query: HostQuery,
               opts: LaunchOptions) -> int:
        raise UsageError(f"--plan {source.path}: the report names no inventory (a local "
                         "audit?); pass -i INVENTORY")

    def emit(self, plan: Plan, directory: str) -> str:
        return host_scripts(plan, directory)

    def reach(self, hosts: Sequence[Host], connect_timeout: float,
              accept_new_host_keys: bool) -> dict[str, str]:
        self.answered = [h.name for h in hosts]
        return {}

    def follow(self, jobid: str) -> None:
        pass  # no scheduler: the commands run on the hosts as they are

    def job_end(self) -> Optional[SchedulerEnd]:
        return None

    def close(self) -> None:
        pass
